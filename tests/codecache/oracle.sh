#!/bin/sh
# instrument against valgrind: instr_oracle's kernels (a streaming loop, a
# pointer chase, a function with branches and a call inside, one with rep
# movsb, unaligned SSE loads and loads straddling lines, one reading and
# writing thread-local data through fs with the stack protector's canary
# read at %fs:0x28, a loop moving two pointers by constant steps) call
# after call
# on the same data, instrumented live through padroned with Cachegrind's
# geometry options, then uninstrumented, the calls paused each time (so
# whole calls only; C, the calls seen, is the entry's Ir). The same
# program run apart under valgrind:
# - lackey --trace-mem=yes, N calls: per PC of the kernel (as offsets from
#   its entry, the runs' addresses differ), report's Ir, Dr and Dw are
#   lackey's per call times C; a lackey "M" (read-modify-write) counts as
#   one Dr, as Cachegrind counts it; a rep instruction is fetched once per
#   iteration and once more;
# - the same trace's instructions of the kernel, each with the next one of
#   the kernel (a call's callee in between left out, as the units of the
#   kernel's ring follow each other): each edge of report's CFG runs
#   lackey's count of that pair per call times C (0 if never);
# - cachegrind with the same --I1/--D1/--LL, M calls of a kernel that does
#   all the memory work of its run: Ir, Dr, Dw per call are cachegrind's
#   exactly, and D1mr, D1mw, DLmr, DLmw per call within 1% (the first call
#   starts cold in both; the kernels' data outgrow LL, so that call is like
#   the others but for a few lines).
# Then some kernels again under the refs analysis (-a refs: no cache
# simulated, a rep instruction's iterations counted from its references):
# per PC, Ir, Dr and Dw are lackey's per call times C.
# The target checks every call's result itself all along and its original
# bytes are back after uninstrument. Needs valgrind (skipped without).
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
oracle=$b/tests/targets/instr_oracle
. "$(dirname "$0")/tap.sh"
tap_setup cc-oracle
I1=32768,8,64 D1=16384,4,64 LL=65536,8,64
LACKEY_CALLS=3 CG_CALLS=200 LIVE_CALLS=300
kernels=${ORACLE_KERNELS:-stream chase branchy mixed tls bump}	# (a subset by hand)
refs_kernels=$(for k in mixed tls; do case " $kernels " in *" $k "*) echo "$k" ;; esac; done)
echo 1..$((5 * $(echo $kernels | wc -w) + 2 * $(echo $refs_kernels | wc -w)))
if ! command -v valgrind >/dev/null; then
	for k in $kernels; do for i in 1 2 3 4 5; do skip "$k $i" "no valgrind installed"; done; done
	for k in $refs_kernels; do for i in 1 2; do skip "$k refs $i" "no valgrind installed"; done; done
	exit 0
fi

# hex to decimal, in awk (mawk has no strtonum)
AWK_HEX='function hex(s,  i, n, c) { n = 0; s = tolower(s); sub(/^0x/, "", s)
	for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; n = n * 16 + c }
	return n }'
# the kernel's size in the program, from its symbol table
size_of() { nm -S "$oracle" | awk -v k="$1" '$4 == k { print $2; exit }'; }
# where a run of instr_oracle says K is: its "K=0x..." line in FILE
entry_in() { sed -n "s/^$1=\(0x[0-9a-f]*\)$/\1/p" "$2" | head -1; }

# lackey's trace of N calls of K: "OFFSET Ir Dr Dw" per PC inside K, the
# counts divided by N ("-" where one does not divide: not per call)
lackey_per_pc() {
	k=$1
	valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/$k.lackey" \
		"$oracle" "$k" $LACKEY_CALLS >"$tmp/$k.lk.out" 2>&1 || return 1
	lo=$(entry_in "$k" "$tmp/$k.lk.out")
	[ -n "$lo" ] || return 1
	awk -v lo="$lo" -v size="$(size_of "$k")" -v n=$LACKEY_CALLS "$AWK_HEX"'
	BEGIN { base = hex(lo); len = hex(size) }
	/^I  / { split(substr($0, 4), a, ","); off = hex(a[1]) - base; in_k = off >= 0 && off < len
		 if (in_k) ir[off]++; next }
	in_k && /^ [LMS] / { if (substr($0, 2, 1) == "S") dw[off]++; else dr[off]++ }
	function per(x) { return x % n ? "-" : x / n }
	END { for (o in ir) print o, per(ir[o]), per(dr[o] + 0), per(dw[o] + 0) }' \
		"$tmp/$k.lackey" | sort -n
}

# lackey's trace of K: "FROM TO N" per pair of consecutive instructions
# of K (offsets from its entry), N per call ("-" where it does not divide)
lackey_pairs() {
	lo=$(entry_in "$1" "$tmp/$1.lk.out")
	awk -v lo="$lo" -v size="$(size_of "$1")" -v n=$LACKEY_CALLS "$AWK_HEX"'
	BEGIN { base = hex(lo); len = hex(size); prev = -1 }
	/^I  / { split(substr($0, 4), a, ","); off = hex(a[1]) - base
		 if (off < 0 || off >= len) next
		 if (prev >= 0) pair[prev " " off]++
		 prev = off }
	END { for (p in pair) print p, (pair[p] % n ? "-" : pair[p] / n) }' "$tmp/$1.lackey"
}
# report -j's edges of the kernel: "AT TO COUNT KIND" (offsets from its entry)
padrone_edges() {
	grep -o '"at":"0x[0-9a-f]*","to":"0x[0-9a-f]*","kind":"[a-z_]*","count":[0-9]*' \
		"$tmp/$1.rep.out" | sed 's/"[a-z]*"://g; s/"//g' |
		awk -F, -v e="$2" "$AWK_HEX"' { print hex($1) - hex(e), hex($2) - hex(e), $4, $3 }'
}
# every edge of report's CFG against lackey's pairs per call times C
same_edges() {
	k=$1
	padrone_edges "$k" "$entry" >"$tmp/$k.e"
	lackey_pairs "$k" >"$tmp/$k.lp"
	echo "# $k: C=$C; edge (offsets): padrone's count | lackey's per call"
	awk -v c="$C" 'NR == FNR { l[$1 " " $2] = $3; next }
		{ w = ($1 " " $2) in l ? l[$1 " " $2] : 0
		  print "#   +" $1 " -> +" $2 " " $4 ": " $3 " | " w
		  if (w == "-" || $3 != w * c) bad = 1; n++ }
		END { exit bad || !n }' "$tmp/$k.lp" "$tmp/$k.e"
}

# report -j's per-PC rows of the kernel: "OFFSET Ir Dr Dw" (from its entry),
# the events found by name
padrone_per_pc() {
	grep -o '{"pc":"0x[0-9a-f]*","events":{[^}]*}}' "$tmp/$1.rep.out" |
		sed 's/[{}"]//g; s/,events:/,/; s/pc://' |
		awk -F, -v e="$2" "$AWK_HEX"' { for (i = 2; i <= NF; i++) { split($i, kv, ":"); v[kv[1]] = kv[2] }
			print hex($1) - hex(e), v["Ir"], v["Dr"], v["Dw"] }' | sort -n
}
# report -j's function totals: "Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw"
padrone_totals() {
	grep -o '"entry":"0x[0-9a-f]*","active":[a-z]*,"events":{[^}]*}' "$tmp/$1.rep.out" |
		head -1 | sed 's/.*"events":{//; s/"[A-Za-z0-9]*"://g; s/}//; s/,/ /g'
}
# cachegrind's totals for K over M calls: the same nine events, summed over
# K's lines in its out file
cachegrind_totals() {
	k=$1
	valgrind --tool=cachegrind --cache-sim=yes --I1=$I1 --D1=$D1 --LL=$LL \
		--cachegrind-out-file="$tmp/$k.cg" "$oracle" "$k" $CG_CALLS \
		>"$tmp/$k.cg.out" 2>&1 || return 1
	grep -q '^events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw *$' "$tmp/$k.cg" || return 1
	awk -v k="$k" '/^fn=/ { on = $0 == "fn=" k; next } /^fl=/ { next }
		on && /^[0-9]/ { for (i = 2; i <= 10; i++) s[i] += $i; seen = 1 }
		END { if (!seen) exit 1; for (i = 2; i <= 10; i++) printf "%s%d", (i > 2 ? " " : ""), s[i]; print "" }' \
		"$tmp/$k.cg"
}

# live: instrument K in a running instr_oracle through padroned (with -a
# ANALYSIS if given), until it made LIVE_CALLS more calls, then
# uninstrument and report -j into $tmp/K.rep.out (K-ANALYSIS.rep.out).
# Sets entry and orig.
live() {
	k=$1
	t=$1${2:+-$2}
	start_target "$oracle" "$k" 0 || return 1
	entry=$(entry_in "$k" "$tmp/out")
	orig=$(code "$entry")
	start_padroned
	pause || return 1
	run "$t.ins" "$padrone" -p "$pid" instrument ${2:+-a $2} --I1 $I1 --D1 $D1 --LL $LL "$k" ||
		return 1
	status "$t.ins" 0 || return 1
	[ "$(code "$entry")" != "$orig" ] || return 1
	resume || return 1	# a line written since: its calls ran the copy
	c0=$(calls)
	i=0
	while [ "$(calls)" -lt $((c0 + LIVE_CALLS)) ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	pause || return 1
	run "$t.un" "$padrone" -p "$pid" uninstrument "$k"
	resume || return 1
	run "$t.rep" "$padrone" -p "$pid" report -j
	run "$t.det" "$padrone" -p "$pid" detach
	wait "$dpid" 2>/dev/null
	dpid=
	status "$t.un" 0 && status "$t.rep" 0 && status "$t.det" 0 &&
		[ "$(code "$entry")" = "$orig" ] && goes_on
}
stop_target() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	pid=
}

# lackey's per-call counts times C against report's, per PC: both lists
# must name the same PCs (K's report, or K-ANALYSIS's)
same_per_pc() {
	k=$1
	t=$1${2:+-$2}
	C=$(padrone_per_pc "$t" "$entry" | awk '$1 == 0 { print $2 }')
	[ -n "$C" ] && [ "$C" -gt 0 ] || return 1
	padrone_per_pc "$t" "$entry" >"$tmp/$t.p"
	awk -v c="$C" '{ print $1, $2 * c, $3 * c, $4 * c }' "$tmp/$k.l" >"$tmp/$t.lc"
	echo "# $t: C=$C calls seen; per PC offset: padrone Ir Dr Dw | lackey's per call | x C"
	awk 'NR == FNR { l[$1] = $2 " " $3 " " $4; next }
	     { print "#   +" $1 ": " $2, $3, $4 " | " l[$1] }' "$tmp/$k.l" "$tmp/$t.p"
	! grep -q -- - "$tmp/$k.l" && [ -s "$tmp/$k.l" ] && cmp -s "$tmp/$t.p" "$tmp/$t.lc"
}

# per call, both sides, as "%.3f" (for the report); Ir, Dr, Dw must be
# equal and each miss event named in MISSES within 1% (0 only as 0):
# padrone's totals over C calls, cachegrind's over CG_CALLS
versus_cachegrind() {
	k=$1
	misses=" $2 "
	set -- $(padrone_totals "$k")
	p="$*"
	set -- $(cat "$tmp/$k.g")
	g="$*"
	echo "# $k per call: padrone (C=$C) / cachegrind (M=$CG_CALLS): Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw"
	[ -n "$p" ] && [ -n "$g" ] || return 1
	awk -v p="$p" -v g="$g" -v c="$C" -v m=$CG_CALLS -v misses="$misses" 'BEGIN {
		split(p, a, " "); split(g, b, " "); bad = 0
		split("Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw", name, " ")
		for (i = 1; i <= 9; i++) {
			x = a[i] / c; y = b[i] / m
			printf "#   %-5s %14.3f %14.3f\n", name[i], x, y
			if (i == 1 || i == 4 || i == 7) {	# counts: exact
				if (a[i] * m != b[i] * c) bad = 1
			} else if (index(misses, " " name[i] " ")) {
				d = x - y; if (d < 0) d = -d
				if (d > 0.01 * (x > y ? x : y)) bad = 1
			}
		}
		exit bad }'
}

for k in $kernels; do
	lackey_per_pc "$k" >"$tmp/$k.l"
	cachegrind_totals "$k" >"$tmp/$k.g"
	check "$k: instrumented live through padroned, computes right, original back after" live "$k"
	check "$k: per PC, report's Ir Dr Dw are lackey's per call times the calls" same_per_pc "$k"
	check "$k: per edge of the CFG, report's count is lackey's per call times the calls" \
		same_edges "$k"
	case $k in
	branchy | mixed)	# their data fit D1: their few misses are the first
		# call's and those their caller's stack lines cause (not
		# instrumented)
		check "$k: Ir Dr Dw per call are cachegrind's" versus_cachegrind "$k" "" ;;
	tls)	# its data outgrow D1 but fit LL, where cachegrind finds them
		# from setup's writes and padrone (seeing the kernel only) not
		# before the first call
		check "$k: Ir Dr Dw per call are cachegrind's, D1 read misses within 1%" \
			versus_cachegrind "$k" D1mr ;;
	*)
		check "$k: Ir Dr Dw per call are cachegrind's, D1/LL misses within 1%" \
			versus_cachegrind "$k" "D1mr DLmr D1mw DLmw" ;;
	esac
	stop_target
	check "$k: the valgrind runs printed the kernel's result" eval \
		'grep -q "^result" "$tmp/$k.lk.out" && grep -q "^result" "$tmp/$k.cg.out"'
done
for k in $refs_kernels; do
	check "$k -a refs: instrumented live through padroned, computes right, original back after" \
		live "$k" refs
	check "$k -a refs: per PC, report's Ir Dr Dw are lackey's per call times the calls" \
		same_per_pc "$k" refs
	stop_target
done
