#!/bin/sh
# An instrumented copy that cannot be taken out at once: the target is never
# left running it without its gs_base (each thread's state row: a unit
# written through %gs at address 0 kills it).
# - Kept: a worker held in a signal handler that interrupted it inside the
#   copy (instr_kernel hold) keeps the copy past uninstrument's grace
#   period. The entry is back; the copy's gs_base, rings and record stay,
#   and a later uninstrument, once the worker left, releases them.
# - Kept at detach: padroned leaves the copy, the threads' gs_base and the
#   record; the worker let go runs the rest of its unit right; a later
#   session's restore takes it all out.
# - A failed uninstrument (PADRONE_TEST_UNDO_FAIL=N in padroned's
#   environment: its first N stops that would take a copy out fail as a
#   stop timing out does) changes nothing: uninstrument again works and
#   leaves padroned no more fds than before; at detach, padroned leaves the
#   copy running (its gs_base kept) for a later restore.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
tap_setup cc-instr-kept
echo 1..21
start_kernel 2 1000 hold "$tmp/go"
goes_on() { resumes; }	# its threads may wait for a consumer gone first
# padroned's open files but sockets: a command's connection closes on its
# side a moment after the command has returned
fds() { ls -l "/proc/$dpid/fd" | grep -- ' -> ' | grep -c -v 'socket:'; }
entry=$(entry_of axpy)
orig=$(code $entry)

# start_padroned_failing K[,K...]: start_padroned with its K-th stops that
# would take a copy out failing (PADRONE_TEST_UNDO_FAIL, padroned's alone)
start_padroned_failing() {
	PADRONE_TEST_UNDO_FAIL=$1
	export PADRONE_TEST_UNDO_FAIL
	start_padroned
	unset PADRONE_TEST_UNDO_FAIL
}
# detach: padroned leaves
detach() {
	run det "$padrone" -p "$pid" detach
	wait "$dpid" 2>/dev/null
	dpid=
}
# hold: SIGUSR1 until a worker is held in its handler, interrupted inside
# the copy (the main thread blocks it; one interrupted elsewhere returns)
hold() {
	rm -f "$tmp/go"
	h=$(grep -c '^held' "$tmp/out") i=0
	while [ "$(grep -c '^held' "$tmp/out")" -le "$h" ] && [ $i -lt 300 ]; do
		kill -USR1 "$pid"
		sleep 0.1
		i=$((i + 1))
	done
	[ "$(grep -c '^held' "$tmp/out")" -gt "$h" ]
}
# let_go: the held worker returns from its handler, into the copy
let_go() {
	g=$(grep -c '^let go' "$tmp/out")
	touch "$tmp/go"
	wait_for '^let go' 1 "$g"
}

start_padroned
run ins "$padrone" -p "$pid" instrument axpy
check "instrument axpy through padroned" eval 'status ins 0 && [ "$(code $entry)" != "$orig" ]'
check "a worker is held in a signal handler that interrupted it inside the copy" hold
run un "$padrone" -p "$pid" uninstrument axpy
check "uninstrument with the worker held: the entry is back, the copy's rings kept" \
	eval 'status un 0 && [ "$(code $entry)" = "$orig" ] && [ "$(rings)" -gt 0 ] && goes_on'
run again "$padrone" -p "$pid" instrument axpy
check "instrumenting it again meanwhile: refused (status 2), saying why" \
	eval 'status again 2 && says again "still in its copy" && [ "$(code $entry)" = "$orig" ]'
check "the worker let go runs the rest of its unit in the copy, and on, right" \
	eval 'let_go && goes_on && goes_on'
run un2 "$padrone" -p "$pid" uninstrument
check "uninstrument again releases the kept copy: no ring left" \
	eval 'status un2 0 && [ "$(rings)" = 0 ] && goes_on'
run ins2 "$padrone" -p "$pid" instrument axpy
check "no thread's gs_base left (instrument works again)" \
	eval 'status ins2 0 && [ "$(code $entry)" != "$orig" ] && goes_on'

check "held inside the copy again" hold
run un3 "$padrone" -p "$pid" uninstrument axpy
check "uninstrument with it held: the copy kept" \
	eval 'status un3 0 && [ "$(code $entry)" = "$orig" ] && [ "$(rings)" -gt 0 ]'
detach
check "detach with the copy kept: padroned leaves, the copy's rings stay, the target right" \
	eval 'status det 0 && [ "$(rings)" -gt 0 ] && goes_on'
check "the worker let go after the detach runs the rest of its unit, and on, right" \
	eval 'let_go && goes_on && goes_on'
run res "$padrone" -p "$pid" restore axpy
check "a later session's restore takes the kept copy out: no ring left" \
	eval 'status res 0 && [ "$(rings)" = 0 ] && [ "$(code $entry)" = "$orig" ] && goes_on'
run once "$padrone" -p "$pid" instrument axpy
check "no thread's gs_base left: a one-shot instrument works" \
	eval 'status once 0 && [ "$(code $entry)" = "$orig" ] && [ "$(rings)" = 0 ] && goes_on'

start_padroned_failing 2
run ins3 "$padrone" -p "$pid" instrument axpy
run un4 "$padrone" -p "$pid" uninstrument axpy
fds0=$(fds)	# once instrumented and uninstrumented
run ins4 "$padrone" -p "$pid" instrument axpy
run un5 "$padrone" -p "$pid" uninstrument axpy
check "an uninstrument whose stop fails: refused, saying why; still instrumented, right" \
	eval 'status ins3 0 && status un4 0 && status ins4 0 && ! status un5 0 &&
	      says un5 "did not stop" && [ "$(code $entry)" != "$orig" ] && goes_on && goes_on'
run un6 "$padrone" -p "$pid" uninstrument axpy
check "uninstrument again: done, no ring left, the target right" \
	eval 'status un6 0 && [ "$(code $entry)" = "$orig" ] && [ "$(rings)" = 0 ] && goes_on'
check "padroned has no more fds than after the first uninstrument ($fds0)" \
	poll 10 eval '[ "$(fds)" -le "$fds0" ]'
detach

start_padroned_failing 1,2
run ins5 "$padrone" -p "$pid" instrument axpy
run un7 "$padrone" -p "$pid" uninstrument axpy
check "instrumented; uninstrument's stop fails" eval 'status ins5 0 && ! status un7 0'
detach
check "detach whose stop fails too: padroned leaves the copy in, gs_base kept, the target right" \
	eval '[ "$(code $entry)" != "$orig" ] && [ "$(rings)" -gt 0 ] && goes_on && goes_on'
run res2 "$padrone" -p "$pid" restore axpy
check "a later session's restore takes it out: the original back, no ring left" \
	eval 'status res2 0 && [ "$(code $entry)" = "$orig" ] && [ "$(rings)" = 0 ] && goes_on'
run once2 "$padrone" -p "$pid" instrument axpy
check "no thread's gs_base left: a one-shot instrument works, the target right" \
	eval 'status once2 0 && [ "$(code $entry)" = "$orig" ] && goes_on'
check "nothing went wrong in the target (no BAD, no fault)" fine
