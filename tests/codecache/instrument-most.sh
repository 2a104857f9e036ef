#!/bin/sh
# The most functions instrumented at once: each thread has one gs_base and
# its state area a section per function, 8 of them. On instr_kernel pair
# (its threads checking their own results), eight functions are instrumented
# through padroned one after the other (one by its sub_ADDR name); a ninth is refused with status 2,
# saying why, its code untouched, the target right; once one of the eight
# is uninstrumented the ninth is accepted; uninstrument puts every original
# back and unmaps the rings.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
tap_setup cc-instr-most
echo 1..7
start_kernel 2 1000 pair
eight="axpy axmy axpy_checked axmy_checked.part.0 spin dispatch short_lived one_child"
originals() { for f in $eight work; do code "$(entry_of "$f")"; done; }
orig=$(originals)
work_orig=$(code "$(entry_of work)")

start_padroned

# the last by the name reports give code without a symbol (sub_ADDR)
ok8=0
for f in $eight; do
	as=$f
	[ "$f" = one_child ] && as=$(printf 'sub_%x' "$(entry_of one_child)")
	run "i_$f" "$padrone" -p "$pid" instrument "$as"
	status "i_$f" 0 && says "i_$f" "^instrumented $as" && ok8=$((ok8 + 1))
done
check "eight functions instrumented one after the other, one as sub_ADDR ($ok8 of 8)" \
	test "$ok8" = 8
run ninth "$padrone" -p "$pid" instrument work
check "a ninth is refused: status 2, says 8 are the most at once" \
	eval 'status ninth 2 && says ninth "8 functions are instrumented, the most at once"'
check "... its code untouched, the target right" \
	eval '[ "$(code "$(entry_of work)")" = "$work_orig" ] && goes_on'
run un_one "$padrone" -p "$pid" uninstrument spin
run ninth2 "$padrone" -p "$pid" instrument work
check "with one uninstrumented, the ninth is accepted in its section" \
	eval 'status un_one 0 && status ninth2 0 && says ninth2 "^instrumented work"'
check "the target computes right with eight instrumented" goes_on
run un "$padrone" -p "$pid" uninstrument
check "uninstrument: every original back, no ring mapped" \
	eval 'status un 0 && [ "$(originals)" = "$orig" ] && [ "$(rings)" = 0 ]'
kill "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
dpid=
check "padroned gone, the target runs on, right" goes_on
