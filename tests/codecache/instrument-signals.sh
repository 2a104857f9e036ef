#!/bin/sh
# Signals whose handler runs the instrumented function on the thread they
# interrupt (issue 10): instr_signals calls scale in a loop while a 1 kHz
# SIGALRM handler calls it too, on other data, interrupting the loop's calls
# anywhere in the copy (between a unit's captures and its commit, inside
# the commit, inside the ring stub). Instrumented (exhaustive) through
# padroned for a few seconds, the calls paused at instrument and at
# uninstrument so the copy sees whole calls only:
# - the target's loop and handler both compute right all along, and after;
# - no unit lost but those a handler spoiled (it ran between a unit's
#   captures and its commit: the unit is dropped, never recovered with the
#   handler's addresses): report's gaps are 0, the entry's Ir is the calls
#   the target counted (loop's and handler's: the entry block keeps no
#   slot); scale's Dr (one load per element, the ret's per call) plus the
#   units lost (each made one load: the loop's and the ret's blocks are the
#   ones keeping a slot) are the elements the target asked for and the
#   calls, its Dw (one store per element) at most the elements and at
#   least those less the units lost;
# - padroned SIGKILLed while instrumented and the handler running: the
#   target runs on, right, handler and all; a later restore puts it back.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
tap_setup cc-instr-signals
RUN_SECONDS=${SIGNALS_SECONDS:-4}
echo 1..7
start_target "$b/tests/targets/instr_signals"
set -- $(sed -n 's/^scale=\(0x[0-9a-f]*\) \([0-9]*\) \([0-9]*\)$/\1 \2 \3/p' "$tmp/out")
entry=$1 loop_n=$2 handler_n=$3
orig=$(code "$entry")

last() { grep "^$1" "$tmp/out" | tail -1; }
field() { last "$1" | cut -d' ' -f"$2"; }
# the loop's and the handler's calls both go on (within 30 s), none wrong
goes_on() {
	l=$(field alive 2) h=$(field alive 3) i=0
	while { [ "$(field alive 2)" -le "$l" ] || [ "$(field alive 3)" -le "$h" ]; } &&
		[ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	[ "$(field alive 2)" -gt "$l" ] && [ "$(field alive 3)" -gt "$h" ] &&
		[ "$(field alive 5)" = 0 ] && kill -0 "$pid"
}
# the loop has printed RUN_SECONDS more seconds' worth of alive lines
# (within 120 s: an exhaustive copy waits for a consumer that a loaded
# machine or ASan slows down)
run_a_while() {
	have=$(grep -c '^alive' "$tmp/out") i=0
	while [ "$(grep -c '^alive' "$tmp/out")" -lt $((have + RUN_SECONDS * 20)) ] &&
		[ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
	[ $i -lt 1200 ]
}

start_padroned
instrumented() {
	pause || return 1
	set -- $(last paused)
	l0=$2 h0=$3
	run ins "$padrone" -p "$pid" instrument -m exhaustive scale || return 1
	status ins 0 && [ "$(code "$entry")" != "$orig" ] && resume && run_a_while &&
		pause || return 1
	set -- $(last paused)
	l1=$2 h1=$3
	run un "$padrone" -p "$pid" uninstrument scale
	resume || return 1
	run rep "$padrone" -p "$pid" report -j
	status un 0 && status rep 0 && [ "$(code "$entry")" = "$orig" ] && goes_on
}
check "scale instrumented $RUN_SECONDS s with its 1 kHz handler calling it: target right, original back" \
	instrumented
calls=$((l1 - l0 + h1 - h0)) elements=$(((l1 - l0) * loop_n + (h1 - h0) * handler_n))
echo "# calls while instrumented: loop $((l1 - l0)), handler $((h1 - h0)); elements $elements"
tr ',' '\n' <"$tmp/rep.out" | grep -E '"(lost_units|gaps)"' | sed 's/^/# /'
lost=$(grep -o '"lost_units":[0-9]*,"gaps":[0-9]*' "$tmp/rep.out" | sed 's/"lost_units":\([0-9]*\),.*/\1/')
check "no gap; units lost (spoiled by the handler) fewer than the handler's calls" eval \
	'grep -q "\"lost_units\":[0-9]*,\"gaps\":0[,}]" "$tmp/rep.out" && [ -n "$lost" ] && [ "$lost" -le $((h1 - h0)) ]'
# "Ir Dr Dw" of the function's total and of its entry's PC
totals() {
	grep -o '"entry":"0x[0-9a-f]*","active":[a-z]*,"events":{[^}]*}' "$tmp/rep.out" | head -1 |
		sed 's/.*"events":{//; s/"[A-Za-z0-9]*"://g; s/}//' | awk -F, '{ print $1, $4, $7 }'
}
entry_ir() {
	grep -o "{\"pc\":\"$entry\",\"events\":{\"Ir\":[0-9]*" "$tmp/rep.out" | sed 's/.*://'
}
echo "# report: entry Ir $(entry_ir); Ir Dr Dw $(totals)"
check "the entry's Ir is the calls the target made (loop and handler)" \
	eval '[ "$(entry_ir)" = "$calls" ] && [ "$calls" -gt 0 ] && [ $((h1 - h0)) -gt 0 ]'
check "Dr and the units lost are the elements asked for and a ret per call; Dw those less some lost" \
	eval 'set -- $(totals); [ $(($2 + lost)) = $((elements + calls)) ] &&
	      [ "$3" -le "$elements" ] && [ $(($3 + lost)) -ge "$elements" ]'
run det "$padrone" -p "$pid" detach
wait "$dpid" 2>/dev/null
dpid=

# padroned killed with the handler running instrumented code
start_padroned
run ins2 "$padrone" -p "$pid" instrument -m exhaustive scale
check "instrumented again, padroned SIGKILLed: the target runs on, right, handler and all" \
	eval 'status ins2 0 && run_a_while && kill -9 "$dpid" && wait "$dpid" 2>/dev/null;
	      dpid=; goes_on && run_a_while && goes_on'
run res "$padrone" -p "$pid" restore scale
check "a later session's restore: the original back" \
	eval 'status res 0 && [ "$(code "$entry")" = "$orig" ]'
check "the target runs on, right" goes_on
