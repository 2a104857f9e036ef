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
chmod 700 "$PADRONE_RUNDIR"
echo 1..7
: >"$tmp/out"	# there before wait_for reads it
"$b/tests/targets/instr_kernel" 2 1000 pair >"$tmp/out" 2>&1 &
pid=$!
dpid=
cleanup() {
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
rings() { grep -c 'memfd:padrone-ring' "/proc/$pid/maps"; }
base=0x$(awk '$6 ~ /instr_kernel$/ { split($1, a, "-"); print a[1]; exit }' /proc/$pid/maps)
entry_of() { echo $((base + 0x$(nm "$b/tests/targets/instr_kernel" | awk -v f="$1" '$3 == f { print $1 }'))); }
eight="axpy axmy axpy_checked axmy_checked.part.0 spin dispatch short_lived one_child"
originals() { for f in $eight work; do code "$(entry_of "$f")"; done; }
orig=$(originals)
work_orig=$(code "$(entry_of work)")

: >"$tmp/d.out"
"$padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
dpid=$!
i=0
while ! grep -q "padroned: serving" "$tmp/d.out" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done

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
