#!/bin/sh
# Every fuzz harness replays its corpus (tests/fuzz/corpus/NAME: seeds, and
# every input that once crashed one): none may crash, leak or trip a
# sanitizer.
b=${top_builddir:-.}
s=${top_srcdir:-.}
set -- protocol rep lackey elf
echo "1..$#"
n=0
for h in "$@"; do
	n=$((n + 1))
	out=$("$b/tests/fuzz/fuzz-$h" "$s/tests/fuzz/corpus/$h" 2>&1)
	st=$?
	if [ $st = 0 ]; then
		echo "ok $n - fuzz-$h: ${out##*: }"
	else
		echo "not ok $n - fuzz-$h (status $st)"
		echo "$out" | tail -30 | sed 's/^/# /'
	fi
done
