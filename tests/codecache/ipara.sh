#!/bin/sh
# Callers that rely on -fipa-ra: cc_fib's main keeps values in rcx and rdx
# across its calls to fib, which never writes them; the iterative fib_iter
# does. replace finds the registers (and says so, dry run too) and puts a
# gate saving them between fib and the new code: the target goes on
# computing right (without it, every round was BAD). New code that writes
# no more than the original (fib_rec, recursive as it) gets no gate.
b=${top_builddir:-.}
padrone=$b/src/padrone
repl=$b/tests/codecache/repl
. "$(dirname "$0")/tap.sh"
tap_setup cc-ipara

echo "1..6"
"$b/tests/targets/cc_fib" >"$tmp/out" 2>&1 &
pid=$!
wait_for ready 1 0
wait_for "round .* ok"
rely='callers rely on fib leaving [a-z0-9, ]*rcx, rdx[a-z0-9, ]* intact (-fipa-ra: the call at main+0x[0-9a-f]* may keep values in [a-z0-9, ]*rcx, rdx'
run dry "$padrone" -p "$pid" replace -n fib "$repl/fib_iter.o"
check "a dry run names the registers callers keep across the call, and the caller" \
	eval 'status dry 0 && says dry "^$rely.*): would put a gate of [0-9]* bytes saving them around the new code$"'
run replace "$padrone" -p "$pid" replace fib "$repl/fib_iter.o"
check "replace puts a gate saving them" \
	eval 'status replace 0 && says replace "^$rely.*): a gate at 0x[0-9a-f]* saves them around the new code$" && says replace "^replaced fib"'
have=$(grep -c "^round" "$tmp/out")
wait_for "^round" 20 "$have"
check "the target computes right through the gate and the iterative fib" \
	eval 'fine && [ "$(grep -c "^round" "$tmp/out")" -ge $((have + 20)) ]'
run restore "$padrone" -p "$pid" restore fib
have=$(grep -c "^round" "$tmp/out")
wait_for "^round" 5 "$have"
check "restore takes the gate out with the new code; the target computes right" \
	eval 'status restore 0 && fine'
run same "$padrone" -p "$pid" replace fib "$repl/fib_rec.o"
check "new code writing no more than the original gets no gate" \
	eval 'status same 0 && says same "^replaced fib" && ! says same gate'
have=$(grep -c "^round" "$tmp/out")
wait_for "^round" 10 "$have"
check "... and the target computes right" eval 'fine'
