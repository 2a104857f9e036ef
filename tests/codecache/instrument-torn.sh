#!/bin/sh
# A padrone killed (SIGKILL) at each point of instrument's install in turn
# (PADRONE_TEST_KILL_AT=K: it kills itself at the K-th, as a kill from
# outside landing just there would): after the code, the state area and
# the rings' range were made, after the directory recorded them, after
# the rings' memfd was made, after the rings and the state blocks were
# written (the target running between the install's two stops), after the
# rings were mapped, after the threads' gs_base, after the threads were
# moved into the copy,
# once installed, and (the one-shot padrone uninstruments at detach) once
# the threads' gs_base and the rings were taken out but the directory
# still records the copy (the state area is freed only after the record
# is forgotten, so the later restore frees it once). Each time the target runs on, right; a later session's
# restore leaves no ring mapped and no ring's memfd open in the target, the
# original code back, and no thread's gs_base set (instrumenting it again
# works: padrone refuses a process any thread of which uses gs); the target
# still right. Until K passes the last point and the install completes.
# Then the same with the kill inside one of the install's remote system
# calls (see the second loop).
b=${top_builddir:-.}
padrone=$b/src/padrone
. "$(dirname "$0")/tap.sh"
tap_setup cc-instr-torn
start_kernel 2 1000
goes_on() { resumes; }	# its threads may wait for a killed install's consumer
ring_fds() { ls -l "/proc/$pid/fd" 2>/dev/null | grep -c 'padrone-ring'; }
entry=$(entry_of axpy)
orig=$(code $entry)

# a later session's restore: 0, or (killed before the directory recorded
# anything) "not replaced"; then nothing of the instrumentation is left
restored() {
	{ status res 0 || { status res 2 && says res 'is not replaced'; }; } &&
		[ "$(code $entry)" = "$orig" ] && [ "$(rings)" = 0 ] && [ "$(ring_fds)" = 0 ]
}
k=1
while [ $k -lt 200 ]; do
	run torn env PADRONE_TEST_KILL_AT=$k "$padrone" -p "$pid" instrument axpy
	[ "$(cat "$tmp/torn.st")" = 137 ] || break	# the install got past its last point
	check "killed at point $k of the install: the target runs on, right" goes_on
	run res "$padrone" -p "$pid" restore axpy
	check "killed at point $k: a later restore leaves no ring, no ring's fd, the original code" \
		restored
	run again "$padrone" -p "$pid" instrument axpy
	check "killed at point $k: no thread's gs_base left (instrumenting works again), target right" \
		eval 'status again 0 && [ "$(code $entry)" = "$orig" ] && [ "$(rings)" = 0 ] && goes_on'
	k=$((k + 1))
done
check "the install and its undo went through every point ($((k - 1)) killed, at least 9) and then completed" \
	eval 'status torn 0 && [ $k -gt 9 ] && [ "$(rings)" = 0 ] && [ "$(code $entry)" = "$orig" ]'
# Killed inside one of the system calls the install runs in the target
# (PADRONE_TEST_KILL_IN_SYSCALL=K: at the K-th point among before a call,
# at its entry, at its exit, between its mask and its registers put back;
# every 3rd, so that each kind comes round): the thread goes on where it
# was, and a later restore leaves nothing.
run un "$padrone" -p "$pid" restore axpy
k=1 killed=0
while [ $k -lt 1000 ]; do
	run sc env PADRONE_TEST_KILL_IN_SYSCALL=$k "$padrone" -p "$pid" instrument axpy
	[ "$(cat "$tmp/sc.st")" = 137 ] || break
	killed=$((killed + 1))
	check "killed at point $k of the install's system calls: the target runs on, right" goes_on
	run res "$padrone" -p "$pid" restore axpy
	check "killed at point $k of the system calls: a later restore leaves nothing" restored
	k=$((k + 3))
done
check "killed in the install's system calls $killed times (at least 4), then it completed (and was undone as padrone left)" \
	eval 'status sc 0 && [ $killed -ge 4 ] && [ "$(code $entry)" = "$orig" ] && goes_on'
echo "1..$n"
