#!/usr/bin/env bash
# padrone-sim as a user sees it: options, man page, output formats, errors
# and exit statuses. Prints TAP.
set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
sim=$top_builddir/padrone-sim
man=$top_srcdir/man/padrone-sim.1
tmp=$(mktemp -d /tmp/padrone-sim-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
n=0
check() {	# check DESCRIPTION COMMAND...: ok if the command succeeds
	local what=$1; shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $what"; else echo "not ok $n - $what"; fi
}
echo "1..19"

# Tiny geometry: D1 2 sets x 2 ways of 64 B.
G=(--I1=256,2,64 --D1=256,2,64 --LL=1024,4,64 --cachegrind)
cat > "$tmp/trace" <<'T'
==1== Lackey, an example Valgrind tool
I  00001000,4
 L 00002000,8
 S 00002000,8
I  00001004,4
 M 00003000,4
 L 0000303c,8
program output line
I  00001008,2
 L 00002080,4
 L 00002100,4
 L 00002000,4
T

"$sim" --help > "$tmp/help"
opts=$(sed -nE 's/^ +(-[a-zA-Z], )?(--[a-zA-Z0-9-]+).*/\2/p' "$tmp/help" | sort -u)
missing=
for o in $opts; do
	grep -qE "^\.It Fl (-${o#--}|[a-zA-Z] , Fl -${o#--})( |$)" "$man" || missing="$missing $o"
done
check "the man page documents every option of --help${missing:+ (missing:$missing)}" test -z "$missing"
check "--help names every option the parser knows" \
	bash -c "for o in --lackey --I1 --D1 --L2 --LL --cachegrind --workers --recovery-workers --analysis --trace-out --top --json --help --version; do grep -q -- \"\$o\" '$tmp/help' || exit 1; done"
check "--version prints padrone's version" bash -c "'$sim' --version | grep -qE '^padrone-sim [0-9]+\.[0-9]+\.[0-9]+( \(git [0-9a-z.-]+\))?$'"

"$sim" --lackey - "${G[@]}" --json --top 0 < "$tmp/trace" > "$tmp/out.json" 2>"$tmp/err"; st=$?
# Worked out by hand: D1 set 0 sees lines 80 80 c0 c0 82 84 80 (2 ways),
# set 1 sees c1; the straddling load at 303c misses once (c1) and brings
# both lines to LL; the last load of 2000 misses D1 but hits LL.
want='{"refs":{"instr":3,"reads":5,"writes":1,"modifies":1},"I1":{"misses":1},"D1":{"read_misses":6,"write_misses":0},"LL":{"read_misses":5,"write_misses":0},"workers":1,"imbalance":1.0,"per_pc":[{"pc":"0x1008","reads":3,"writes":0,"D1_misses":3,"LL_misses":2},{"pc":"0x1004","reads":2,"writes":0,"D1_misses":2,"LL_misses":2},{"pc":"0x1000","reads":1,"writes":1,"D1_misses":1,"LL_misses":1}]}'
check "JSON from standard input has the agreed shape and counts" test "$st:$(cat "$tmp/out.json")" = "0:$want"

"$sim" --lackey "$tmp/trace" "${G[@]}" --workers 2 --json --top 0 > "$tmp/out2.json"
check "2 workers give the same counts" test "$(sed 's/"workers":2/"workers":1/; s/"imbalance":[0-9.]*/"imbalance":1.0/' "$tmp/out2.json")" = "$want"

"$sim" --lackey "$tmp/trace" "${G[@]}" > "$tmp/out.txt"
check "text output is cachegrind's summary plus top PCs" \
	bash -c "grep -q '^I   refs: *3$' '$tmp/out.txt' && grep -q '^D1  misses: *6  ( *6 rd   + *0 wr)$' '$tmp/out.txt' && grep -q '^D1 cache: *256 B, 64 B, 2-way associative$' '$tmp/out.txt' && grep -q '^Top PCs by misses:' '$tmp/out.txt' && grep -q '^0x1008 ' '$tmp/out.txt'"

sed '4s/.*/ S 0000zz00,8/' "$tmp/trace" > "$tmp/bad"
"$sim" --lackey - "${G[@]}" --json < "$tmp/bad" > "$tmp/bad.json" 2> "$tmp/bad.err"; st=$?
check "a malformed line exits 1 naming its line" \
	bash -c "test $st = 1 && grep -q \"^padrone-sim: <stdin>:4: malformed lackey line (expected ',' after the address): ' S 0000zz00,8'\$\" '$tmp/bad.err'"
check "... and everything else is still simulated and printed" \
	grep -q '"refs":{"instr":3,"reads":5,"writes":0,"modifies":1}' "$tmp/bad.json"

"$sim" --lackey "$tmp/trace" --D1=1000,2,64 2> "$tmp/err"; st=$?
check "bad geometry exits 2 with the reason" \
	bash -c "test $st = 2 && grep -q 'D1: size 1000 is not a multiple' '$tmp/err'"
"$sim" --lackey "$tmp/trace" --cachegrind --I1=256,2,64 --D1=49152,16,64 --LL=1024,4,64 2> "$tmp/err"; st=$?
check "cachegrind mode refuses a non-power-of-two set count as cachegrind does" \
	bash -c "test $st = 2 && grep -q 'D1: 48 sets is not a power of two, which cachegrind refuses' '$tmp/err'"
"$sim" --lackey "$tmp/trace" --workers 0 2> "$tmp/err"; st1=$?
"$sim" --lackey "$tmp/trace" --bogus 2>> "$tmp/err"; st2=$?
"$sim" 2>> "$tmp/err"; st3=$?
check "bad options exit 2" test "$st1$st2$st3" = 222
printf '==1== Lackey without --trace-mem=yes\n\001\377 binary\n' > "$tmp/notrace"
"$sim" --lackey "$tmp/notrace" > "$tmp/out" 2> "$tmp/err"; st=$?
check "a file with no trace line exits 1 saying so, with no report" \
	bash -c "test $st = 1 && test ! -s '$tmp/out' && grep -q '^padrone-sim: $tmp/notrace: not a lackey trace: none of its 2 lines is a trace line' '$tmp/err'"
"$sim" --lackey "$tmp/nonexistent" 2> "$tmp/err"; st=$?
check "an unreadable input exits 3 naming it" \
	bash -c "test $st = 3 && grep -q 'cannot open $tmp/nonexistent: No such file' '$tmp/err'"

"$sim" --lackey "$tmp/trace" --trace-out "$tmp/round" "${G[@]}" > /dev/null
check "--trace-out writes the trace back (lackey lines round-trip)" \
	bash -c "grep -E '^(I  | [LSM] )' '$tmp/trace' | cmp -s - '$tmp/round'"
check "-a list lists the analyses" \
	bash -c "test \"\$('$sim' -a list | cut -d' ' -f1 | tr '\n' ' ')\" = 'blocks cache edges memtrace reuse '"
# An analysis is its file plus its name in PIPELINE_ANALYSES: a file whose
# line was forgotten is named here.
files=$(cd "$top_srcdir/pipeline" && ls analysis-*.c | sed 's/^analysis-//; s/\.c$//' | sort | tr '\n' ' ')
check "every pipeline/analysis-NAME.c is an analysis -a list knows (files: $files)" \
	bash -c "test \"\$('$sim' -a list | cut -d' ' -f1 | sort | tr '\n' ' ')\" = '$files'"
"$sim" --lackey "$tmp/trace" "${G[@]}" -a cache -a blocks -a reuse --json > "$tmp/multi.json"
check "other analyses add their object to the JSON" \
	bash -c "grep -q '\"blocks\":{\"distinct\":1,\"executions\":1' '$tmp/multi.json' && grep -q '\"reuse\":{\"line\":64,\"accesses\":8,\"cold\":5,\"buckets\":\[{\"min\":0,\"max\":0,\"count\":2},{\"min\":4,\"max\":7,\"count\":1}\]' '$tmp/multi.json'"
check "with blocks, the cache counts per block" \
	grep -q '"per_block":\[{"pc":"0x1000","end":"0x100a","executions":1,"reads":6,"writes":1,"D1_misses":6,"LL_misses":5}\]' "$tmp/multi.json"
"$sim" --lackey "$tmp/trace" "${G[@]}" --workers 64 --json > "$tmp/w.json"
check "workers are capped at the set groups (2 sets: 2)" grep -q '"workers":2,' "$tmp/w.json"
