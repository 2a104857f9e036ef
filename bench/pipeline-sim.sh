#!/usr/bin/env bash
# make bench, pipeline/ (sim): simulator throughput and 1->2 worker scaling
# (bench/pipeline-sim), then padrone-sim against cachegrind on the same
# programs: cachegrind's wall time running the program vs padrone-sim's
# replaying the program's lackey trace (parsing included), and whether the
# counts agree.
set -eu
b=${top_builddir:-.}
geom=(--I1=32768,8,64 --D1=32768,8,64 --LL=262144,8,64)
tmp=$(mktemp -d /tmp/pipeline-sim-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# Real streams too: the lackey traces of two validation programs.
traces=()
if command -v valgrind >/dev/null; then
	for prog in chase rowcol; do
		valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/$prog" \
			"$b/tests/pipeline/progs/$prog" col >/dev/null && traces+=("$tmp/$prog")
	done
fi
"$b/bench/pipeline-sim" "${PIPELINE_SIM_REFS:-20000000}" "${traces[@]}"
rm -f "${traces[@]}"
secs() { date +%s.%N; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
diffsec() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

if ! command -v valgrind >/dev/null; then
	echo "pipeline-sim: valgrind not installed: no comparison with cachegrind"
	exit 0
fi
# The programs: two of ours, and coreutils' sort (a program not written for
# this) on 5000 shuffled lines. Valgrind's start-up (cachegrind running
# /bin/true) is printed apart: for the small programs it is most of
# cachegrind's time, so only the larger run compares the simulators' rates.
seq 1 5000 | shuf --random-source=<(yes) >"$tmp/sort.in"
t0=$(secs)
valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null /bin/true >/dev/null 2>&1
startup=$(diffsec "$t0" "$(secs)")
json_refs() { sed -nE 's/.*"refs":\{"instr":([0-9]+),"reads":([0-9]+),"writes":([0-9]+),"modifies":([0-9]+)\}.*/\1 \2 \3 \4/p' "$1" | awk '{ print $1 + $2 + $3 + $4 }'; }
json_misses() { sed -nE 's/.*"D1":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\},"LL":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\}.*/\1 \3 \2 \4/p' "$1"; }
mrefs() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.1f", n / s / 1e6 }'; }
for prog in chase scatter sort; do
	case $prog in
	sort) cmd=(sort "$tmp/sort.in") ;;
	*) cmd=("$b/tests/pipeline/progs/$prog") ;;
	esac
	t0=$(secs)
	valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/$prog.lackey" "${cmd[@]}" >/dev/null
	t1=$(secs)
	valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$tmp/$prog.cg" "${geom[@]}" \
		"${cmd[@]}" >/dev/null 2>&1
	t2=$(secs)
	"$b/padrone-sim" --lackey "$tmp/$prog.lackey" --cachegrind "${geom[@]}" --workers 1 --json \
		>"$tmp/$prog.1.json"
	t3=$(secs)
	"$b/padrone-sim" --lackey "$tmp/$prog.lackey" --cachegrind "${geom[@]}" --workers 2 --json \
		>"$tmp/$prog.2.json"
	t4=$(secs)
	cg=$(sed -n 's/^summary: //p' "$tmp/$prog.cg" | awk '{ print $5, $6, $8, $9 }')
	ours=$(json_misses "$tmp/$prog.1.json")
	ours2=$(json_misses "$tmp/$prog.2.json")
	refs=$(json_refs "$tmp/$prog.1.json")
	mb=$(du -m "$tmp/$prog.lackey" | cut -f1)
	cgt=$(diffsec "$t1" "$t2") s1=$(diffsec "$t2" "$t3") s2=$(diffsec "$t3" "$t4")
	# cachegrind's own rate, when its run is more than its start-up
	cgrate=$(awk -v a="$cgt" -v b="$startup" -v n="$refs" 'BEGIN {
		if (a - b > 0.2 * a) printf "%.1f M refs/s after it", n / (a - b) / 1e6
		else printf "it is nearly all of it" }')
	echo "pipeline-sim vs cachegrind ($prog, $(mrefs "$refs" 1) M refs): cachegrind ${cgt}s" \
		"(${startup}s of it valgrind's start-up: $cgrate)" \
		"| padrone-sim on its ${mb} MB lackey trace, parsing included: 1 worker ${s1}s" \
		"($(mrefs "$refs" "$s1") M refs/s; cachegrind's wall / ours $(ratio "$cgt" "$s1")x)," \
		"2 workers ${s2}s ($(ratio "$cgt" "$s2")x) | making the trace: lackey $(diffsec "$t0" "$t1")s"
	if [ "$cg" = "$ours" ] && [ "$ours" = "$ours2" ]; then
		echo "pipeline-sim vs cachegrind ($prog): D1mr DLmr D1mw DLmw agree exactly: $cg"
	else
		echo "pipeline-sim vs cachegrind ($prog): COUNTS DIFFER: cachegrind $cg, ours $ours / $ours2"
	fi
	rm -f "$tmp/$prog.lackey"
done
