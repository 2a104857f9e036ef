#!/bin/sh
# A padroned serving an instrumented process that does nothing must not use
# a CPU: its consumers (a thread per ring, "padrone-ring": a ring per
# thread and spare row, per function) sleep until a producer enters a
# chunk, waking only to beat their heartbeat. On instr_kernel pair (two
# threads calling axpy and axmy, a short-lived thread every 50 ms) with
# both instrumented, the target is stopped (SIGSTOP) for a while: its rings'
# consumers then wake a few times a second each (they woke 100 times a
# second, a fixed 10 ms nap), and padroned's CPU stays low; continued, the
# target computes right and the records flow again; uninstrument puts the
# originals back.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
tap_setup cc-instr-idle
chmod 700 "$PADRONE_RUNDIR"
echo 1..7
: >"$tmp/out"	# there before wait_for reads it
"$b/tests/targets/instr_kernel" 2 1000 pair >"$tmp/out" 2>&1 &
pid=$!
dpid=
cleanup() {
	[ -n "$pid" ] && kill -CONT "$pid" 2>/dev/null
	[ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null
	tap_cleanup
}
trap cleanup EXIT
wait_for '^alive' 2 0
bad() { grep '^alive' "$tmp/out" | tail -1 | sed -n 's/^alive [0-9]* bad \([0-9]*\)$/\1/p'; }
calls() { grep '^alive' "$tmp/out" | tail -1 | cut -d' ' -f2; }
goes_on() {
	c=$(calls)
	wait_for '^alive' 3 && [ "$(calls)" -gt "$c" ] && [ "$(bad)" = 0 ]
}
# the padrone-ring threads of padroned: "COUNT SWITCHES" (context switches
# so far, all of them)
rings() {
	for t in /proc/"$dpid"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = padrone-ring ] &&
			awk '/ctxt_switches/ { s += $2 } END { print s + 0 }' "$t/status" 2>/dev/null
	done | awk '{ s += $1; n++ } END { print n + 0, s + 0 }'
}
units() {	# the units recovered so far, all threads, from report -j
	grep -o '"units":[0-9]*' "$tmp/$1.out" | cut -d: -f2 | awk '{ s += $1 } END { print s + 0 }'
}
ticks() { awk '{ print $14 + $15 }' "/proc/$dpid/stat"; }	# padroned's CPU so far
stopped() {	# the target in a job-control stop (every thread)
	i=0
	while grep -q '^State:[[:space:]]*[RSD]' /proc/"$pid"/task/*/status 2>/dev/null &&
	      [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 300 ]
}

: >"$tmp/d.out"
"$padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
dpid=$!
i=0
while ! grep -q "padroned: serving" "$tmp/d.out" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done

run ins "$padrone" -p "$pid" instrument axpy axmy
check "instrument axpy axmy: both instrumented, the target computes right" \
	eval 'status ins 0 && says ins "^instrumented axmy" && goes_on'

kill -STOP "$pid"
stopped
sleep 1	# the consumers take what was complete, then find nothing more
SECONDS_IDLE=4
r0=$(rings) t0=$(ticks)
sleep $SECONDS_IDLE
r1=$(rings) t1=$(ticks)
nrings=${r1% *}
switches=$(( ${r1#* } - ${r0#* } ))
cpu_ticks=$((t1 - t0))
hz=$(getconf CLK_TCK)
echo "# idle ${SECONDS_IDLE}s: $nrings consumers, $switches context switches, padroned $cpu_ticks ticks of $hz/s (load $(cut -d' ' -f1 /proc/loadavg))"
check "a consumer per ring, named padrone-ring (two functions, a ring per thread and spare row each)" \
	[ "$nrings" -ge 8 ]
# the heartbeat needs a wake every 500 ms (2/s); 100/s with the old nap
check "the idle target's consumers sleep: fewer than 20 wakes a second each" \
	[ "$switches" -lt $((20 * nrings * SECONDS_IDLE)) ]
# loosely: what the tracer's polling and the naps cost, even on a busy machine
check "padroned uses less than a fifth of a CPU while the target is idle" \
	[ "$cpu_ticks" -lt $((hz * SECONDS_IDLE / 5)) ]

kill -CONT "$pid"
check "continued, the target computes right with both copies" goes_on
run r1 "$padrone" -p "$pid" report -j
u1=$(units r1)
goes_on
run r2 "$padrone" -p "$pid" report -j
check "the records flow again after the idle stretch" \
	eval 'status r2 0 && [ "$(units r2)" -gt "$u1" ]'
run un "$padrone" -p "$pid" uninstrument
check "uninstrument: the originals back, the target computes right" \
	eval 'status un 0 && goes_on'
"$padrone" -p "$pid" detach >/dev/null 2>&1
wait "$dpid" 2>/dev/null
dpid=
