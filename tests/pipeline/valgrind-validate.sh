#!/usr/bin/env bash
# Validation against the real thing: each memory-pattern program runs under
# `valgrind --tool=lackey --trace-mem=yes` and under
# `valgrind --tool=cachegrind --cache-sim=yes` with the same explicit
# geometry; padrone-sim --cachegrind replays the lackey trace and must match
# cachegrind's D1 and LL read/write misses (summary: line of
# --cachegrind-out-file) within 0.5% — in practice exactly — and 1 and 2
# workers must agree exactly. Prints TAP; the figures go in comments.
set -u
top_builddir=${top_builddir:-.}
sim=$top_builddir/padrone-sim
progs=$top_builddir/tests/pipeline/progs
geom=(--I1=32768,8,64 --D1=32768,8,64 --LL=262144,8,64)
cases=("rowcol row" "rowcol col" "chase" "copy" "scatter")

ntests=$(( ${#cases[@]} * 3 + 2 ))
echo "1..$ntests"
if ! command -v valgrind >/dev/null; then
	for i in $(seq 1 $ntests); do echo "ok $i # SKIP valgrind not installed"; done
	exit 0
fi
tmp=$(mktemp -d /tmp/padrone-validate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# json KEY...: the numbers of padrone-sim's JSON in cachegrind's summary
# order (Ir I1mr - Dr D1mr DLmr Dw D1mw DLmw; Dr = reads + modifies).
ours() {
	sed -nE 's/^\{"refs":\{"instr":([0-9]+),"reads":([0-9]+),"writes":([0-9]+),"modifies":([0-9]+)\},"I1":\{"misses":([0-9]+)\},"D1":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\},"LL":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\},.*/\1 \5 - \2 \4 \6 \8 \3 \7 \9/p' "$1" |
		awk '{ print $1, $2, $3, $4 + $5, $6, $7, $8, $9, $10 }'
}

# within A B: |A - B| <= 0.5% of B
within() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d * 1000 <= b * 5) }'; }

n=0
for c in "${cases[@]}"; do
	name=${c// /-}
	set -- $c
	prog=$progs/$1; shift
	lk=$tmp/$name.lackey cg=$tmp/$name.cg
	ok=1 why=
	if ! valgrind --tool=lackey --trace-mem=yes --log-file="$lk" "$prog" "$@" >"$tmp/out1" 2>&1; then
		ok=0 why="lackey run failed"
	elif ! valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$cg" "${geom[@]}" \
		"$prog" "$@" >"$tmp/out2" 2>"$tmp/cg.err"; then
		ok=0 why="cachegrind run failed"
	elif ! cmp -s "$tmp/out1" "$tmp/out2"; then
		ok=0 why="the program printed different things under lackey and cachegrind"
	fi
	for w in 1 2; do
		"$sim" --lackey "$lk" --cachegrind "${geom[@]}" --workers $w --json --top 0 \
			>"$tmp/$name.$w.json" 2>"$tmp/sim.err" || { ok=0; why="padrone-sim failed: $(cat "$tmp/sim.err")"; }
	done
	read -r c_ir c_i1 c_il c_dr c_d1r c_dlr c_dw c_d1w c_dlw < <(sed -n 's/^summary: //p' "$cg" 2>/dev/null)
	read -r o_ir o_i1 _ o_dr o_d1r o_dlr o_dw o_d1w o_dlw < <(ours "$tmp/$name.1.json")
	echo "# $name ($(head -1 "$tmp/out1")): refs Ir/Dr/Dw ours $o_ir/$o_dr/$o_dw cachegrind $c_ir/$c_dr/$c_dw"
	echo "# $name: D1mr ours $o_d1r cg $c_d1r | D1mw ours $o_d1w cg $c_d1w | DLmr ours $o_dlr cg $c_dlr | DLmw ours $o_dlw cg $c_dlw | I1mr ours $o_i1 cg $c_i1"

	n=$((n + 1))
	if [ $ok = 1 ] && [ -n "${c_d1r:-}" ] && [ -n "${o_d1r:-}" ] &&
	   within "$o_d1r" "$c_d1r" && within "$o_d1w" "$c_d1w" &&
	   within "$o_dlr" "$c_dlr" && within "$o_dlw" "$c_dlw"; then
		echo "ok $n - $name: D1 and LL read/write misses within 0.5% of cachegrind"
	else
		echo "not ok $n - $name: D1/LL misses differ from cachegrind ${why:+($why)}"
	fi
	n=$((n + 1))
	if [ "${o_d1r:-}" = "${c_d1r:-x}" ] && [ "$o_d1w" = "$c_d1w" ] && [ "$o_dlr" = "$c_dlr" ] &&
	   [ "$o_dlw" = "$c_dlw" ] && [ "$o_ir" = "$c_ir" ] && [ "$o_dr" = "$c_dr" ] &&
	   [ "$o_dw" = "$c_dw" ] && [ "$o_i1" = "$c_i1" ]; then
		echo "ok $n - $name: references, I1, D1 and LL misses equal cachegrind's exactly"
	else
		echo "not ok $n - $name: not exactly cachegrind's counts"
	fi
	n=$((n + 1))
	# Identical but for the two fields that say how it was run.
	if [ -s "$tmp/$name.1.json" ] &&
	   diff <(sed -E 's/"workers":[0-9]+,"imbalance":[0-9.e+-]+//' "$tmp/$name.1.json") \
		<(sed -E 's/"workers":[0-9]+,"imbalance":[0-9.e+-]+//' "$tmp/$name.2.json") >/dev/null; then
		echo "ok $n - $name: 1 and 2 workers agree exactly (imbalance $(sed -nE 's/.*"imbalance":([0-9.]+).*/\1/p' "$tmp/$name.2.json"))"
	else
		echo "not ok $n - $name: 1 and 2 workers disagree"
	fi
	rm -f "$lk"
done

# The default geometry: cachegrind's own (this host's caches, LL adjusted
# when its set count is not a power of two) against padrone-sim's, with no
# --I1/--D1/--LL on either side.
prog=$progs/chase
valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/host.lackey" "$prog" >/dev/null 2>&1
valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$tmp/host.cg" "$prog" \
	>/dev/null 2>&1
"$sim" --lackey "$tmp/host.lackey" --cachegrind --workers 2 >"$tmp/host.txt" 2>&1
"$sim" --lackey "$tmp/host.lackey" --cachegrind --workers 2 --json >"$tmp/host.json" 2>&1
cg_geom=$(sed -n 's/^desc: //p' "$tmp/host.cg")
our_geom=$(grep -E '^(I1|D1|LL) cache:' "$tmp/host.txt")
echo "# host geometry: cachegrind: $(echo $cg_geom)"
echo "# host geometry: ours:       $(echo $our_geom)"
n=$((n + 1))
if [ -n "$cg_geom" ] && [ "$cg_geom" = "$our_geom" ]; then
	echo "ok $n - with no geometry given, the caches are cachegrind's"
else
	echo "not ok $n - with no geometry given, the caches differ from cachegrind's"
fi
read -r c_ir c_i1 c_il c_dr c_d1r c_dlr c_dw c_d1w c_dlw < <(sed -n 's/^summary: //p' "$tmp/host.cg")
read -r o_ir o_i1 _ o_dr o_d1r o_dlr o_dw o_d1w o_dlw < <(ours "$tmp/host.json")
echo "# host geometry (chase): D1mr ours $o_d1r cg $c_d1r | D1mw ours $o_d1w cg $c_d1w | DLmr ours $o_dlr cg $c_dlr | DLmw ours $o_dlw cg $c_dlw"
n=$((n + 1))
if [ -n "${c_d1r:-}" ] && [ -n "${o_d1r:-}" ] && within "$o_d1r" "$c_d1r" && within "$o_d1w" "$c_d1w" &&
   within "$o_dlr" "$c_dlr" && within "$o_dlw" "$c_dlw"; then
	echo "ok $n - ... and D1 and LL misses are within 0.5% of cachegrind's"
else
	echo "not ok $n - ... but D1/LL misses differ from cachegrind's"
fi
