#!/bin/sh
# Several functions instrumented at once, through padroned as a user types
# it, on instr_kernel pair: two threads calling axpy then axmy (each per
# call one read of x[i] and one of y[i] and one write of o[i] per element,
# and the ret's read of the stack), and a short-lived thread cloned every
# 50 ms calling both, all checking their own results. Both functions share
# each thread's state area (one gs_base, a section each): both are
# recorded, the threads cloned meanwhile run both copies right; one
# uninstrumented, the other goes on recording; after both, the per-PC
# counts of each are its kernel's exactly (as instrument.sh checks axpy's),
# the original bytes are back, the rings unmapped, every thread's gs_base
# cleared (a later instrument finds gs free), and a section given back is
# taken again.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/../lib/kernel-counts.sh"
tap_setup cc-instr-multi
echo 1..21
start_kernel 2 1000 pair
churned() { grep '^churned' "$tmp/out" | tail -1 | cut -d' ' -f2; }
# threads were cloned (and ran both copies to the end, right) meanwhile
clones_run() {
	k=$(churned)
	wait_for '^churned' 4 && [ "$(churned)" -ge $((k + 2)) ] && [ "$(bad)" = 0 ]
}
# the workers' calls go on within 30 s (threads of an exhaustive copy whose
# padroned was killed wait out the consumer's timeout first, then drop; the
# threads cloned then, with nobody to give them rows, are slow to finish)
late() { resumes; }
axpy=$(entry_of axpy)
axmy=$(entry_of axmy)
orig_axpy=$(code $axpy)
orig_axmy=$(code $axmy)
patched() { [ "$(code $axpy)" != "$orig_axpy" ] && [ "$(code $axmy)" != "$orig_axmy" ]; }
restored() { [ "$(code $axpy)" = "$orig_axpy" ] && [ "$(code $axmy)" = "$orig_axmy" ]; }

start_padroned

tasks() { ls /proc/"$pid"/task | wc -l; }
t_ins=$(tasks)
run ins "$padrone" -p "$pid" instrument axpy axmy
check "instrument axpy axmy: both instrumented at once, both entries patched" \
	eval 'status ins 0 && says ins "^instrumented axpy" && says ins "^instrumented axmy" && patched'
check "the target computes right with both instrumented; threads cloned meanwhile run both copies" \
	eval 'goes_on && clones_run'
# a function's events in report's text (Ir Dr Dw), its first row (one
# instrumented again has a row per time)
evs() { awk -v f="$2" '$10 == f { print $1, $4, $7; exit }' "$tmp/$1.out"; }
run r1 "$padrone" -p "$pid" report
check "report while both are instrumented: each has its references" \
	eval 'status r1 0 && [ "$(evs r1 axpy | cut -d" " -f2)" -gt 0 ] && [ "$(evs r1 axmy | cut -d" " -f2)" -gt 0 ]'
t_un1=$(tasks)
run un1 "$padrone" -p "$pid" uninstrument axmy
check "uninstrument axmy: its original back, axpy's copy still in place" \
	eval 'status un1 0 && [ "$(code $axmy)" = "$orig_axmy" ] && [ "$(code $axpy)" != "$orig_axpy" ]'
run r2 "$padrone" -p "$pid" report
wait_for '^alive' 3
run r3 "$padrone" -p "$pid" report
check "axpy goes on recording alone, axmy's results stay as they were, the target right" \
	eval 'status r3 0 && [ "$(evs r3 axpy | cut -d" " -f1)" -gt "$(evs r2 axpy | cut -d" " -f1)" ] &&
	[ "$(evs r3 axmy)" = "$(evs r2 axmy)" ] && goes_on && clones_run'
t_un2=$(tasks)
run un2 "$padrone" -p "$pid" uninstrument axpy
check "uninstrument axpy: both originals back, no ring left mapped in the target" \
	eval 'status un2 0 && restored && [ "$(rings)" = 0 ]'
run rep "$padrone" -p "$pid" report
# kernel_counts_exact: with C the calls seen (the entry's Ir), each load's Dr
# and the store's Dw are L = 1000 C give or take the partial calls of the
# threads inside the function at the install and the uninstall (T: the two
# workers, the short-lived ones alive then: on a loaded machine more of
# them live at once, so T counts the threads there were at the install
# and at the uninstall), the ret's Dr is R = C give or take T
T=$((t_ins + (t_un1 > t_un2 ? t_un1 : t_un2)))
check "axpy's Dr and Dw per PC are its kernel's exactly, 1000 a call" \
	kernel_counts_exact "$tmp/rep.out" axpy $((2 * T)) "$T"
check "axmy's Dr and Dw per PC are its kernel's exactly, 1000 a call" \
	kernel_counts_exact "$tmp/rep.out" axmy $((2 * T)) "$T"
check "the target runs on, right, with both originals back" goes_on

# every thread's gs_base was cleared: a new instrumentation finds gs free
# (it would refuse "uses gs"); a second instrument call joins the first
run again "$padrone" -p "$pid" instrument axmy
run join "$padrone" -p "$pid" instrument axpy
check "instrument axmy, then axpy: gs_base free again, the second call joins the first" \
	eval 'status again 0 && status join 0 && patched && goes_on && clones_run'
run twice "$padrone" -p "$pid" instrument axmy
check "instrumenting axmy again: status 2, says it is instrumented, the target right" \
	eval 'status twice 2 && says twice "axmy is instrumented" && patched && goes_on'
# axmy's section given back and taken again, axpy's copy running meanwhile
run re "$padrone" -p "$pid" uninstrument axmy \; instrument axmy
check "uninstrument axmy, instrument it again: its section taken again, both recording" \
	eval 'status re 0 && patched && goes_on && clones_run'
run r4 "$padrone" -p "$pid" report
wait_for '^alive' 3
run r5 "$padrone" -p "$pid" report
check "both record: each function's Ir grows" \
	eval '[ "$(evs r5 axpy | cut -d" " -f1)" -gt "$(evs r4 axpy | cut -d" " -f1)" ] &&
	[ "$(evs r5 axmy | cut -d" " -f1)" -gt "$(evs r4 axmy | cut -d" " -f1)" ]'
# a function instrumented while the others are switched off joins them,
# and is told so (nothing would come of it until --on)
run soff "$padrone" -p "$pid" uninstrument axmy \; instrument --off \; instrument axmy
run son "$padrone" -p "$pid" instrument --on
check "instrument while switched off: says it is off and how to switch on; --on: both record" \
	eval 'status soff 0 && says soff "^instrumentation is switched off (as before): .instrument --on. records" &&
	status son 0 && goes_on'
run un3 "$padrone" -p "$pid" uninstrument
check "uninstrument (all): both originals back, no ring mapped" \
	eval 'status un3 0 && restored && [ "$(rings)" = 0 ]'
run det "$padrone" -p "$pid" detach
check "detached (padroned leaves), the target runs on, right" \
	eval 'status det 0 && goes_on && clones_run'
# a padroned killed with both instrumented: a later session's restore of
# one takes out its copy and rings and leaves the threads' gs_base to the
# other's copy, which runs on; the other's restore clears them
start_padroned
run kins "$padrone" -p "$pid" instrument axpy axmy
rings_both=$(rings)
kill -9 "$dpid"
wait "$dpid" 2>/dev/null
dpid=
check "padroned killed with both instrumented: the target runs on, right, both copies in place" \
	eval 'status kins 0 && patched && late && late'
# the threads run the orphaned copies slowly (see late): restore waits for
# them to leave as long as late does, not the default 2 s (under ASan on a
# loaded machine a thread was still in axpy's copy then, so its code, rings
# and gs_base stayed and the next instrument found gs in use)
run kres1 "$padrone" -p "$pid" restore -t 30000 axmy
check "a later restore of axmy: its original back, its rings unmapped, axpy's copy runs on right" \
	eval 'status kres1 0 && [ "$(code $axmy)" = "$orig_axmy" ] && [ "$(code $axpy)" != "$orig_axpy" ] &&
	[ "$(rings)" -gt 0 ] && [ "$(rings)" -lt "$rings_both" ] && late && late'
run kres2 "$padrone" -p "$pid" restore -t 30000 axpy
check "then restore axpy: both originals back, no ring mapped, the target right" \
	eval 'status kres2 0 && restored && [ "$(rings)" = 0 ] && late'
# a one-shot padrone of both (no padroned), which finds gs free (cleared
# by the last restore)
run once "$padrone" -p "$pid" instrument --for 1 axpy axmy
check "instrument --for 1 axpy axmy: both in the report, originals back, the target right" \
	eval 'status once 0 && [ -n "$(evs once axpy)" ] && [ -n "$(evs once axmy)" ] && restored && goes_on'
check "the target still runs and was never harmed" fine
