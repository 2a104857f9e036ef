#!/bin/sh
# A padroned killed (SIGKILL) while a function is instrumented: the target
# runs on, right (its producers find the consumer gone and drop, never
# block); a later session's restore, from the code cache's directory alone,
# puts the original back, sends the threads' gs_base back to 0 (instrument
# works again) and unmaps the rings from the target, which runs on, right.
# The target's main thread makes a short-lived thread every 50 ms (churn):
# those made after padroned was killed inherit its gs_base (nobody gives
# them a row of their own), and must move themselves off it (the ring
# stub's owner check) rather than write into its ring alongside it.
# Then the same with a target that makes a child every 50 ms, by fork,
# vfork and posix_spawn in turn: a forked child keeps its parent's fs base,
# so the owner check must also tell it by its pid.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
tap_setup cc-instr-killed
echo 1..10
start_kernel 2 1000 churn
goes_on() { resumes; }	# its threads may wait for the killed consumer first
entry=$(entry_of axpy)
orig=$(code $entry)
start_padroned
run ins "$padrone" -p "$pid" instrument axpy
check "instrument axpy through padroned: the entry patched, rings mapped" \
	eval 'status ins 0 && [ "$(code $entry)" != "$orig" ] && [ "$(rings)" -gt 0 ]'
# kill_padroned: SIGKILL, as an operator's kill -9 or the OOM killer
kill_padroned() {
	kill -9 "$dpid"
	wait "$dpid" 2>/dev/null
	dpid=
}
# field WORD K: the K-th field of the target's last line that begins with WORD
field() { grep "^$1" "$tmp/out" | tail -1 | cut -d' ' -f"$2"; }
# grown WORD N: the count after WORD grew by N since $since
grown() { [ "$(field "$1" 2)" -ge $((since + $2)) ]; }
kill_padroned
check "padroned killed: the target runs on, right, still instrumented" \
	eval 'goes_on && goes_on && [ "$(code $entry)" != "$orig" ]'
since=$(field churned 2)
check "10 threads made since, each calling axpy 20 times: right, none left on its maker's gs_base" \
	eval 'poll 30 grown churned 10 && [ "$(field churned 4)" = 0 ] && goes_on'
run res "$padrone" -p "$pid" restore axpy
check "a later session's restore: status 0, the original bytes back" \
	eval 'status res 0 && [ "$(code $entry)" = "$orig" ]'
check "the rings are unmapped from the target" eval '[ "$(rings)" = 0 ]'
check "the target runs on, right" goes_on
# no thread's gs_base left pointing at the freed state blocks: instrument
# checks that no thread uses gs (a one-shot padrone undoes it at detach)
run again "$padrone" -p "$pid" instrument axpy
check "instrumenting it again works (gs_base back to 0), and the target runs on" \
	eval 'status again 0 && [ "$(code $entry)" = "$orig" ] && goes_on'

kill -9 "$pid"
wait "$pid" 2>/dev/null
start_kernel 2 1000 fork
start_padroned
run fins "$padrone" -p "$pid" instrument axpy
check "a forking target: instrument axpy through padroned" \
	eval 'status fins 0 && [ "$(rings)" -gt 0 ]'
kill_padroned
since=$(field forked 2)
check "padroned killed: 9 children made since (fork, vfork, posix_spawn) ran right, off their parent's ring" \
	eval 'poll 30 grown forked 9 && [ "$(field forked 4)" = 0 ] && goes_on'
run fres "$padrone" -p "$pid" restore axpy
check "a later session's restore: the rings unmapped, the target runs on, right" \
	eval 'status fres 0 && [ "$(rings)" = 0 ] && goes_on'
