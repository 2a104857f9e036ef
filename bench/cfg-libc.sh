#!/bin/sh
# cfg/: every libc function of a live target (goal <= 1 s), then the
# accuracy figures on the test corpus (function bounds F1 on stripped
# programs, jump-table targets, observed edges missing from the CFGs).
set -e
b=$(cd "${top_builddir:-.}" && pwd)
s=$(cd "${top_srcdir:-$(dirname "$0")/..}" && pwd)
"$b/bench/cfg-libc"
echo "accuracy on the corpus (gcc/clang, -O0/-O2/-O3, PIE/non-PIE, stripped):"
cd "$b" && top_builddir=$b top_srcdir=$s CK_RUN_CASE=oracles CK_VERBOSITY=silent tests/cfg/check_cfg 2>&1 |
	grep -E '^# (function bounds|jump tables|callgrind|loops:|clang loops|[0-9]+ cold)' | sed 's/^# /  /'
