#!/bin/sh
# Branches from elsewhere into the bytes a patch overwrites. cc_side's
# twice_plus has a side entry at +4 that plus_one jumps to; thrice_plus one
# that pick reaches through a jump table: replacing (or measuring) either
# would make those land inside the 5-byte jump, so it is refused, naming
# the branch, whatever -f says; plus_one, which nothing enters sideways, is
# replaced. glibc's __mempcpy_avx_unaligned_erms ends in `jmp
# __memmove_avx_unaligned_erms+3`: that memmove is refused naming it (the
# addresses checked against libc's debug symbols, when installed).
b=${top_builddir:-.}
padrone=$b/src/padrone
alt=$b/tests/codecache/repl/side_alt.o
. "$(dirname "$0")/tap.sh"
tap_setup cc-side

echo "1..11"
"$b/tests/targets/cc_side" >"$tmp/out" 2>&1 &
pid=$!
wait_for ready 1 0
wait_for "round .* ok"
twice=$("$padrone" -p "$pid" disas twice_plus | sed -n '1s/^function twice_plus at \(0x[0-9a-f]*\):.*/\1/p')
before=$(code "$twice")
side='`jmp 0x[0-9A-F]*` at 0x[0-9a-f]* (plus_one+0x3) branches to 0x[0-9a-f]*, inside the 8 bytes at its entry that the jump would overwrite$'
run twice "$padrone" -p "$pid" replace twice_plus "$alt:twice_plus"
check "replacing a function entered sideways by a jmp is refused, naming the jmp" \
	eval 'status twice 2 && says twice "^padrone: redirect: twice_plus cannot be patched: $side"'
run forced "$padrone" -p "$pid" replace -f twice_plus "$alt:twice_plus"
check "... also with -f" eval 'status forced 2 && says forced "twice_plus cannot be patched: $side"'
run dry "$padrone" -p "$pid" replace -n twice_plus "$alt:twice_plus"
check "... and a dry run says so" eval 'status dry 2 && says dry "twice_plus cannot be patched: $side"'
run measure "$padrone" -p "$pid" measure twice_plus 100
check "measuring it is refused the same way" \
	eval 'status measure 2 && says measure "twice_plus cannot be patched: $side"'
run thrice "$padrone" -p "$pid" replace thrice_plus "$alt:thrice_plus"
check "a side entry reached through a jump table is refused, naming the table's jmp" \
	eval 'status thrice 2 && says thrice "^padrone: redirect: thrice_plus cannot be patched: the jump table of \`jmp rcx\` at 0x[0-9a-f]* (pick+0x17) goes to 0x[0-9a-f]*, inside the 8 bytes at its entry that the jump would overwrite$"'
wait_for "round .* ok" 2
check "nothing was written and the target computes right" \
	eval '[ "$(code "$twice")" = "$before" ] && fine'
run one "$padrone" -p "$pid" replace plus_one "$alt:plus_one"
wait_for "round .* ok" 3
check "a function nothing enters sideways is replaced, and the target computes right" \
	eval 'status one 0 && says one "^replaced plus_one (0x" && fine'
run back "$padrone" -p "$pid" restore plus_one
wait_for "round .* ok" 2
check "and restored" eval 'status back 0 && fine'

# glibc: the memmove that its mempcpy variant jumps into, at +3
libc=$(awk '$6 ~ /\/libc\.so\.6$/ && $3 == "00000000" { print $6; exit }' /proc/$pid/maps)
base=$(awk '$6 ~ /\/libc\.so\.6$/ && $3 == "00000000" { split($1, r, "-"); print r[1]; exit }' /proc/$pid/maps)
id=$(readelf -n "$libc" 2>/dev/null | sed -n 's/.*Build ID: \([0-9a-f]*\)/\1/p')
dbg=/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug
sym() { nm "$dbg" 2>/dev/null | awk -v s="$1" '$3 == s { print $1; exit }'; }
memmove=$(sym __memmove_avx_unaligned_erms)
mempcpy=$(sym __mempcpy_avx_unaligned_erms)
if [ -z "$id" ] || [ -z "$memmove" ] || [ -z "$mempcpy" ]; then
	skip "glibc's __memmove_avx_unaligned_erms is refused, naming the mempcpy variant's jmp" \
		"no debug symbols of $libc (libc6-dbg) to find it by"
	skip "... and measuring it too" "no debug symbols"
	skip "... with nothing changed" "no debug symbols"
else
	at=$(printf '0x%x' $((0x$base + 0x$memmove)))
	from=$(printf '0x%x' $((0x$base + 0x$mempcpy + 6)))
	into=$(printf '0x%x' $((0x$base + 0x$memmove + 3)))
	pcpy=$(printf '%x' $((0x$base + 0x$mempcpy)))
	run libc "$padrone" -p "$pid" replace -n "$at" "$alt:plus_one"
	check "glibc's __memmove_avx_unaligned_erms is refused, naming the mempcpy variant's jmp" \
		eval 'status libc 2 && says libc "^padrone: redirect: $at cannot be patched: \`jmp 0x[0-9A-F]*\` at $from (\(sub_$pcpy\|__mempcpy_avx_unaligned_erms\)+0x6) branches to $into, inside the [0-9]* bytes at its entry"'
	run libcm "$padrone" -p "$pid" measure "$at" 10
	check "... and measuring it too" \
		eval 'status libcm 2 && says libcm "cannot be patched: \`jmp 0x[0-9A-F]*\` at $from "'
	wait_for "round .* ok" 2
	check "... with nothing changed" eval '[ "$(code "$at")" = "$(dd if="$libc" bs=1 skip=$((0x$memmove)) count=8 2>/dev/null | od -An -tx1 | tr -d " \n")" ] && fine'
fi
