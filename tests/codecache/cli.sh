#!/bin/sh
# padrone's replace, restore and measure commands on a live cc_vecadd, as a
# user types them, checked by the target's own checksum; and SIGKILL of
# padroned right after a replacement, which must leave the target running.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
obj=$b/tests/codecache/repl/vecadd_avx2.o
. "$(dirname "$0")/tap.sh"
tap_setup cc-cli
"$b/tests/targets/cc_vecadd" >"$tmp/out" 2>&1 &
pid=$!
dpid=
mpid=
fpid=
cleanup() {
	[ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null
	[ -n "$mpid" ] && kill -9 "$mpid" 2>/dev/null
	[ -n "$fpid" ] && kill -9 "$fpid" 2>/dev/null
	tap_cleanup
}
trap cleanup EXIT
# rounds N: wait for N more rounds of the target printing into $out; the
# checksums seen go to $tmp/sums
out=$tmp/out
rounds() {
	have=$(grep -c '^round' "$out")
	i=0
	while [ "$(grep -c '^round' "$out")" -lt $((have + $1)) ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep '^round' "$out" | awk '{ print $6 }' | sort -u >"$tmp/sums"
}
one_checksum() { [ "$(wc -l <"$tmp/sums")" -eq 1 ]; }

echo "1..36"
rounds 1
run replace "$padrone" -p "$pid" replace vecadd "$obj"
check "replace exits 0 and says what it did" \
	eval 'status replace 0 && says replace "^replaced vecadd (0x" && says replace "stopped the world for "'
rounds 2
check "the checksum stays the same with the AVX2 vecadd" one_checksum
run info "$padrone" -p "$pid" info replacements
check "info replacements lists it: entry, sites, stop-the-world time, source" \
	eval 'status info 0 && says info "^FUNCTION  *KIND  *ENTRY  *SITES  *STOP us  *SOURCE$" && says info "^vecadd  *replaced  *0x[0-9a-f]\{16\}  *1  *[0-9]*\.[0-9]  .*vecadd_avx2.o:vecadd$"'
run measure "$padrone" -p "$pid" measure -j vecadd 2000
# (the resolution is one tick of the TSC: under 1 ns on a TSC above 1 GHz)
check "measure -j prints one JSON object with 2000 calls, the clock's resolution and ipc null" \
	eval 'status measure 0 && grep -Eq "^\{\"function\":\"vecadd\",\"calls\":2000,\"mean_ns\":[0-9.]+,\"p50_ns\":[0-9.]+,\"p99_ns\":[0-9.]+,\"min_ns\":[0-9.]+,\"max_ns\":[0-9.]+,\"resolution_ns\":(0\.[1-9]|[1-9][0-9]*\.[0-9]),\"ipc\":null\}$" "$tmp/measure.out"'
# strtol ran once, at the target's start (atol): no call to time
run none "$padrone" -p "$pid" measure -t 0.3 strtol 10
run nonej "$padrone" -p "$pid" measure -j -t 0.3 strtol 10
check "measure of a function not called gives no figures (not a mean of 0), text and JSON" \
	eval 'status none 0 && says none "^strtol: 0 calls timed: no figures$" && ! says none "mean" &&
		status nonej 0 && says nonej "\"calls\":0,\"mean_ns\":null,\"p50_ns\":null,\"p99_ns\":null,\"min_ns\":null,\"max_ns\":null,"'
run twice "$padrone" -p "$pid" replace vecadd "$obj"
check "replacing twice is refused" \
	eval 'status twice 2 && says twice "padrone: redirect: vecadd is already replaced (by .*vecadd_avx2.o:vecadd); restore it first"'
run restore "$padrone" -p "$pid" restore vecadd
check "restore exits 0" eval 'status restore 0 && says restore "^restored vecadd (0x"'
run again "$padrone" -p "$pid" restore vecadd
check "restoring twice is refused" \
	eval 'status again 2 && says again "padrone: restore: vecadd (0x[0-9a-f]*) is not replaced"'
run nosym "$padrone" -p "$pid" replace vecadd "$obj:nothing"
check "a missing symbol is named" \
	eval 'status nosym 2 && says nosym "has no function named nothing; it defines vecadd"'
run nofunc "$padrone" -p "$pid" replace no_such_function "$obj"
check "a missing function is named" \
	eval 'status nofunc 2 && says nofunc "process $pid has no function named no_such_function"'
# FILE without FUNC's name: its only global function, or the list of them
run only "$padrone" -p "$pid" replace -n vecadd "$b/tests/codecache/repl/forever_alt.o"
run several "$padrone" -p "$pid" replace -n vecadd "$b/tests/codecache/repl/side_alt.o"
check "a file without the function's name gives its only function, or lists them" \
	eval 'status only 0 && says only "^would load .*forever_alt.o:forever " && status several 2 && says several "defines several functions (twice_plus, thrice_plus, plus_one)"'
run nofile "$padrone" -p "$pid" replace vecadd "$tmp/absent.o"
check "a missing file is named" eval 'status nofile 2 && says nofile "cannot open $tmp/absent.o"'
run dry "$padrone" -p "$pid" replace -n vecadd "$obj"
run after "$padrone" -p "$pid" restore vecadd
check "a dry run says what it would write and changes nothing" \
	eval 'status dry 0 && says dry "would write 5 bytes at 0x" && status after 2'
entry=$("$padrone" -p "$pid" disas vecadd | sed -n '1s/^function vecadd at \(0x[0-9a-f]*\):.*/\1/p')
inside=$(printf '0x%x' $((entry + 1)))
run inside "$padrone" -p "$pid" replace -n "$inside" "$obj"
check "an address inside a function is refused, naming its entry" \
	eval 'status inside 2 && says inside "padrone: $inside is inside vecadd (${entry}-0x[0-9a-f]*), not at its entry: give vecadd or $entry"'
sub=sub_${entry#0x}
run sub "$padrone" -p "$pid" replace -n "$sub" "$obj"
check "replace takes the sub_ADDR names of reports" \
	eval 'status sub 0 && says sub "would write 5 bytes at $entry"'
run subcfg "$padrone" -p "$pid" cfg "$sub"
check "... and so does cfg" eval 'status subcfg 0 && says subcfg "^function vecadd at $entry"'
run raw "$padrone" -p "$pid" replace -r vecadd "$b/tests/codecache/repl/vecadd_avx2.bin"
rounds 1
run rawback "$padrone" -p "$pid" restore vecadd
check "replace -r takes raw code (the same AVX2 vecadd, no relocations)" \
	eval 'status raw 0 && says raw "(raw)" && status rawback 0'
rounds 2
check "the checksum is the same after restore" one_checksum

# a measuring padrone SIGKILLed mid-way leaves its stub; a later one takes it out
orig=$(code "$entry")
"$padrone" -p "$pid" measure -t 60 vecadd 16777216 >"$tmp/m.out" 2>&1 &
mpid=$!
i=0
while [ "$(code "$entry")" = "$orig" ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 "$mpid"
wait "$mpid" 2>/dev/null
mpid=
rounds 2
check "SIGKILL of a measuring padrone leaves the stub in and the target right" \
	eval '[ "$(code "$entry")" != "$orig" ] && kill -0 $pid && one_checksum'
run staleinfo "$padrone" -p "$pid" info rep
check "info replacements marks the stale stub" \
	eval 'status staleinfo 0 && says staleinfo "^vecadd  *measuring  *0x[0-9a-f]\{16\}  *1 .* measuring stub (padrone process [0-9]*, gone: restore takes it out)$"'
run stale "$padrone" -p "$pid" measure vecadd 100
check "measure names the stale stub and the command that takes it out" \
	eval 'status stale 2 && says stale "padrone: measure: vecadd is still redirected to a measuring stub left by padrone process [0-9]*, which is gone; \`restore vecadd\` takes it out"'
run stalerep "$padrone" -p "$pid" replace vecadd "$obj"
check "so does replace" \
	eval 'status stalerep 2 && says stalerep "\`restore vecadd\` takes it out" && [ "$(code "$entry")" != "$orig" ]'
run unstale "$padrone" -p "$pid" restore vecadd
check "restore takes the stale stub out and puts the original bytes back" \
	eval 'status unstale 0 && says unstale "vecadd is redirected to a measuring stub of padrone process [0-9]*, which is gone: taking it out" && says unstale "^restored vecadd (0x" && [ "$(code "$entry")" = "$orig" ]'
rounds 2
check "the checksum is the same after taking the stale stub out" one_checksum
run remeasure "$padrone" -p "$pid" measure vecadd 500
check "a new measure works again" eval 'status remeasure 0 && says remeasure "^vecadd: 500 calls"'
run none "$padrone" -p "$pid" restore vecadd
check "and nothing is left to restore" eval 'status none 2 && says none "is not replaced"'
run noinfo "$padrone" -p "$pid" info replacements
check "nor to list" eval 'status noinfo 0 && says noinfo "^no function is replaced or measured$"'

# replace -C without -c: the call sites in the callers the last profile saw
# (cc_vecadd_fp has frame pointers, vecadd included: chains reach main)
: >"$tmp/out2"	# there before rounds reads it (the child opens it later)
"$b/tests/targets/cc_vecadd_fp" >"$tmp/out2" 2>&1 &
fpid=$!
out=$tmp/out2
rounds 1
run noprof "$padrone" -p "$fpid" replace -C vecadd "$obj"
check "replace -C without -c and without a profile says to profile first" \
	eval 'status noprof 2 && says noprof "padrone: -C without -c takes vecadd.s callers from the last profile, and there is none: run profile first, or name them with -c"'
fentry=$("$padrone" -p "$fpid" disas vecadd | sed -n '1s/^function vecadd at \(0x[0-9a-f]*\):.*/\1/p')
forig=$(code "$fentry" "$fpid")
"$padrone" -p "$fpid" disas main >"$tmp/main0"
run hotc "$padrone" -p "$fpid" profile 1 ';' replace -C vecadd "$obj"
"$padrone" -p "$fpid" disas main >"$tmp/main1"
check "replace -C takes vecadd's callers from the profile's call chains and says which" \
	eval 'status hotc 0 && says hotc "^callers of vecadd in the last profile, hottest first: main ([0-9]* samples through it)$" && says hotc "^caller main at 0x[0-9a-f]*: 1 direct call to vecadd$" && says hotc "^replaced vecadd (0x[0-9a-f]*): 1 site"'
check "... rewriting main's call, not vecadd's entry" \
	eval '! cmp -s "$tmp/main0" "$tmp/main1" && [ "$(code "$fentry" "$fpid")" = "$forig" ]'
rounds 2
check "the checksum stays the same with main calling the AVX2 vecadd" one_checksum
run hotr "$padrone" -p "$fpid" restore vecadd
"$padrone" -p "$fpid" disas main >"$tmp/main2"
check "restore puts main's call back" \
	eval 'status hotr 0 && says hotr "^put back the original 5 bytes at 0x" && cmp -s "$tmp/main0" "$tmp/main2"'
rounds 2
check "the checksum is the same after restore" one_checksum
kill -9 "$fpid"
wait "$fpid" 2>/dev/null
fpid=
out=$tmp/out

# padroned: replace through it, then SIGKILL it at once
"$padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
dpid=$!
i=0
while ! grep -q "padroned: serving" "$tmp/d.out" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
run viad "$padrone" -p "$pid" replace vecadd "$obj"
kill -9 "$dpid"
wait "$dpid" 2>/dev/null
dpid=
check "replace through padroned exits 0" eval 'status viad 0 && says viad "^replaced vecadd"'
rounds 3
check "SIGKILL of padroned leaves the target running, checksum unchanged" \
	eval 'kill -0 $pid && one_checksum'
run later "$padrone" -p "$pid" restore vecadd
rounds 1
check "a later padrone restores what the killed padroned replaced" \
	eval 'status later 0 && one_checksum'
