#!/bin/sh
# scripts/cfg-oracle as a user runs it on a program of their own: the
# corpus's sources built here with plain flags plus the oracles' needs
# (-Wa,-L -Wl,--emit-relocs), checked from a stripped copy and from the
# running process (which must go on to its right checksum); a wrong
# analysis must be reported as missed, and bad input refused. Prints TAP.
b=${top_builddir:-.}
s=${top_srcdir:-.}
CFG_ORACLE_TOOL=$b/tests/cfg/cfg-oracle
export CFG_ORACLE_TOOL
oracle=$s/scripts/cfg-oracle
tmp=$(mktemp -d /tmp/padrone-cfg-oracle.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
n=0
check() {	# check DESCRIPTION COMMAND...: one TAP line
	n=$((n + 1))
	d=$1
	shift
	if "$@"; then echo "ok $n - $d"; else echo "not ok $n - $d"; fi
}
has() { grep -q -- "$1" "$2"; }
echo "1..9"

c=$s/tests/cfg/corpus
corpus() {	# corpus OUT FLAGS...: the corpus program, built with FLAGS
	out=$1
	shift
	gcc "$@" -w -o "$out" "$c/main.c" "$c/switches.c" "$c/loops.c" "$c/irreducible.c" \
		"$c/noreturn.c" "$c/tailcalls.c" "$c/cold.c" "$c/cleanup.c"
}
if ! { corpus "$tmp/prog" -O2 -Wa,-L -Wl,--emit-relocs &&
	corpus "$tmp/other" -O0 -Wa,-L -Wl,--emit-relocs &&
	gcc -O2 -w -o "$tmp/plain" "$c/bare.c" "$c/fatal.c"; }; then
	echo "Bail out! cannot compile the corpus"
	exit 99
fi

"$oracle" "$tmp/prog" -- 40 >"$tmp/out" 2>&1
st=$?
check "a stripped copy: every goal met, exit 0" \
	sh -c "[ $st -eq 0 ] && grep -q 'F1 1.0000' '$tmp/out' && grep -q ', 0 extra' '$tmp/out' &&
	       grep -q 'callgrind: [1-9][0-9]* observed edges, 0 missing' '$tmp/out' &&
	       grep -q ': met$' '$tmp/out'"
check "its jump tables were checked against their relocations" \
	sh -c "grep -qE 'jump tables: [0-9]+ tables, ([1-9][0-9]+) of \1 relocated targets found' '$tmp/out'"

want=$("$tmp/prog" 40)
strip -o "$tmp/running" "$tmp/prog"
"$tmp/running" 40 wait >"$tmp/run.out" 2>&1 &
pid=$!
i=0
while ! grep -q ready "$tmp/run.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
"$oracle" --no-callgrind --pid "$pid" "$tmp/prog" >"$tmp/live" 2>&1
st=$?
check "the running stripped copy, read from memory: goals met" \
	sh -c "[ $st -eq 0 ] && grep -q 'against process $pid' '$tmp/live' &&
	       grep -q 'F1 1.0000' '$tmp/live' && grep -q 'callgrind: not run' '$tmp/live'"
kill -USR1 "$pid"
wait "$pid"
st=$?
pid=
check "and it ran on to its own checksum" test "$st:$(grep checksum "$tmp/run.out")" = "0:$want"

strip -o "$tmp/other.stripped" "$tmp/other"
"$CFG_ORACLE_TOOL" -v "$tmp/prog" "$tmp/other.stripped" >"$tmp/wrong" 2>&1
st=$?
check "another program's code against the oracle: missed, exit 1, mismatches listed" \
	sh -c "[ $st -eq 1 ] && grep -q ': MISSED$' '$tmp/wrong' && grep -q '^  missed \[' '$tmp/wrong'"

"$oracle" --no-callgrind "$tmp/plain" >"$tmp/plain.out" 2>&1
st=$?
check "without --emit-relocs: told how to get the jump-table oracle" \
	sh -c "[ $st -eq 0 ] && grep -q 'link with -Wl,--emit-relocs' '$tmp/plain.out'"

strip -o "$tmp/nosyms" "$tmp/prog"
"$oracle" --no-callgrind "$tmp/nosyms" >"$tmp/nosyms.out" 2>&1
st=$?
check "a stripped program as the oracle: refused, exit 2" \
	sh -c "[ $st -eq 2 ] && grep -q 'needs the unstripped program' '$tmp/nosyms.out'"
"$oracle" --pid 2>"$tmp/usage"
st=$?
check "usage error: exit 2" sh -c "[ $st -eq 2 ] && grep -q '^usage: cfg-oracle' '$tmp/usage'"
"$oracle" "$tmp/missing" >"$tmp/missing.out" 2>&1
st=$?
check "no such file: exit 2" sh -c "[ $st -eq 2 ] && grep -q 'no file' '$tmp/missing.out'"
