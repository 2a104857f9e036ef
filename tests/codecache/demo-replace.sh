#!/usr/bin/env bash
# demo-replace.sh [BUILD]: PADRONE's live replacement demo.
#
# Starts tests/targets/cc_vecadd, whose vecadd() is built for SSE2 and which
# prints its own time per call and a checksum of its results every half
# second. While it runs, padrone replaces vecadd by an AVX2 build of the
# same C function (tests/codecache/repl/vecadd_avx2.c, cc -O3 -mavx2 -c),
# measures it in place, then restores the original. The printed time per
# call drops with AVX2 and comes back after restore; the checksum never
# changes. BUILD: a configured build directory (default: build, as
# scripts/build build makes it).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)

if ! grep -qw avx2 /proc/cpuinfo; then
	echo "demo-replace: this CPU has no AVX2, so an AVX2 vecadd would not run here." >&2
	echo "demo-replace: (the replacement would be cc -O3 -mavx2 -c; nothing to show)" >&2
	exit 77
fi
make -s -C "$build" tests/targets/cc_vecadd tests/codecache/repl/vecadd_avx2.o src/padrone
padrone=$build/src/padrone
obj=$build/tests/codecache/repl/vecadd_avx2.o
log=$(mktemp /tmp/padrone-demo-replace.XXXXXX)
"$build/tests/targets/cc_vecadd" >"$log" 2>&1 &
pid=$!
cleanup() {
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$log"
}
trap cleanup EXIT

# rounds N: wait for N more "round" lines, print them, and leave in $ns the
# median time per call and in $sums the checksums seen.
rounds() {
	local have want
	have=$(grep -c '^round' "$log" || true)
	want=$((have + $1))
	for _ in $(seq 200); do
		[ "$(grep -c '^round' "$log" || true)" -ge "$want" ] && break
		sleep 0.1
	done
	grep '^round' "$log" | sed -n "$((have + 1)),${want}p" | tee /tmp/padrone-demo-rounds.$$
	ns=$(awk '{ print $3 }' /tmp/padrone-demo-rounds.$$ | sort -n | sed -n "$((($1 + 1) / 2))p")
	sums="$sums $(awk '{ print $6 }' /tmp/padrone-demo-rounds.$$ | sort -u | tr '\n' ' ')"
	rm -f /tmp/padrone-demo-rounds.$$
}

sums=
echo "== cc_vecadd runs as process $pid, vecadd built for SSE2:"
rounds 1 >/dev/null	# the first round warms up
rounds 4
before=$ns

echo
echo "== padrone -p $pid replace vecadd $(basename "$obj")   (cc -O3 -mavx2 -c)"
"$padrone" -p "$pid" replace vecadd "$obj"
rounds 1 >/dev/null	# the round the switch happened in
rounds 4
after=$ns

echo
echo "== padrone -p $pid measure vecadd 20000   (timed inside the process)"
"$padrone" -p "$pid" measure vecadd 20000

echo
echo "== padrone -p $pid restore vecadd"
"$padrone" -p "$pid" restore vecadd
rounds 1 >/dev/null
rounds 3

echo
distinct=$(echo $sums | tr ' ' '\n' | sort -u | grep -c . || true)
echo "time per call: SSE2 $before ns -> AVX2 $after ns (x$(awk -v a="$before" -v b="$after" 'BEGIN { printf "%.2f", a / b }') faster)"
if [ "$distinct" -eq 1 ]; then
	echo "checksum: $(echo $sums | awk '{ print $1 }') in every round, before, during and after"
else
	echo "checksum CHANGED: $sums" >&2
	exit 1
fi
