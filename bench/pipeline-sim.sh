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
for prog in chase scatter; do
	p=$b/tests/pipeline/progs/$prog
	t0=$(secs)
	valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/$prog.lackey" "$p" >/dev/null
	t1=$(secs)
	valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$tmp/$prog.cg" "${geom[@]}" \
		"$p" >/dev/null 2>&1
	t2=$(secs)
	"$b/padrone-sim" --lackey "$tmp/$prog.lackey" --cachegrind "${geom[@]}" --workers 1 --json \
		>"$tmp/$prog.1.json"
	t3=$(secs)
	"$b/padrone-sim" --lackey "$tmp/$prog.lackey" --cachegrind "${geom[@]}" --workers 2 --json \
		>"$tmp/$prog.2.json"
	t4=$(secs)
	cg=$(sed -n 's/^summary: //p' "$tmp/$prog.cg" | awk '{ print $5, $6, $8, $9 }')
	ours=$(sed -nE 's/.*"D1":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\},"LL":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\}.*/\1 \3 \2 \4/p' "$tmp/$prog.1.json")
	ours2=$(sed -nE 's/.*"D1":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\},"LL":\{"read_misses":([0-9]+),"write_misses":([0-9]+)\}.*/\1 \3 \2 \4/p' "$tmp/$prog.2.json")
	mb=$(du -m "$tmp/$prog.lackey" | cut -f1)
	cgt=$(diffsec "$t1" "$t2") s1=$(diffsec "$t2" "$t3") s2=$(diffsec "$t3" "$t4")
	echo "pipeline-sim vs cachegrind ($prog): cachegrind ${cgt}s | padrone-sim on its ${mb} MB lackey trace: 1 worker ${s1}s ($(ratio "$cgt" "$s1")x cachegrind's speed), 2 workers ${s2}s ($(ratio "$cgt" "$s2")x) | making the trace: lackey $(diffsec "$t0" "$t1")s"
	if [ "$cg" = "$ours" ] && [ "$ours" = "$ours2" ]; then
		echo "pipeline-sim vs cachegrind ($prog): D1mr DLmr D1mw DLmw agree exactly: $cg"
	else
		echo "pipeline-sim vs cachegrind ($prog): COUNTS DIFFER: cachegrind $cg, ours $ours / $ours2"
	fi
	rm -f "$tmp/$prog.lackey"
done
