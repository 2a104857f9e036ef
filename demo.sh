#!/usr/bin/env bash
# Install what padrone needs, build it, start the bundled demo workload
# (a small multithreaded renderer), and run padrone on it while it runs:
# attach, list its threads, profile it, show its hot functions and a call
# stack, detach. Then show the workload ran on undisturbed, and stop it.
# Idempotent: run it as often as you like.
set -eu
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"

scripts/install-deps
# Same options as ./test.sh, so the two share one build.
scripts/build build --enable-werror

workload=build/src/examples/padrone-workload
padrone=build/src/padrone
log=$(mktemp /tmp/padrone-demo.XXXXXX)
"$workload" >"$log" 2>&1 &
pid=$!
cleanup() {
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$log"
}
trap cleanup EXIT

for _ in $(seq 100); do	# wait (up to 10 s) until it says it runs
	grep -q '^ready' "$log" && break
	sleep 0.1
done
sleep 1
echo "== the demo workload runs as process $pid:"
tail -n 1 "$log"

echo
echo "== padrone -p $pid info threads \\; profile 3 \\; bt"
echo "   (attach, list the threads, sample 3 s and show the hot functions,"
echo "    show the main thread's stack, detach)"
"$padrone" -p "$pid" info threads \; profile 3 \; bt

echo
echo "== the workload after padrone detached (same crc, tiles still counting):"
sleep 2
tail -n 2 "$log"
kill -0 "$pid"
echo
echo "Try it yourself: $workload & $padrone -p \$!   (then 'help'; see man/padrone.1)"
