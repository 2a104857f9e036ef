#!/bin/sh
# The front ends of instrument (issue 10) on instr_kernel, two threads
# calling axpy and checking their results: padroned --instrument FUNC --for
# SECONDS (text, --json, --output), stopped early by SIGTERM; padrone's
# instrument --for, several functions, --hot N; info replacements; and bad
# input (status 2, named, the process untouched). After every run the
# entry's original bytes are back and the target computes right.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "${top_srcdir:-.}/tests/codecache/tap.sh"
tap_setup instr-once
echo 1..30
start_kernel 2 1000
entry=$(entry_of axpy)
axpy=$((entry - base))	# its offset in the file
orig=$(code $entry)
restored() { [ "$(code $entry)" = "$orig" ]; }
# the Ir of a function's row in NAME's text report (0 when absent)
ir_of() { awk -v f="$2" '$10 == f { print $1; exit }' "$tmp/$1.out" | grep . || echo 0; }
# "NAME" entries in NAME's JSON functions
json_names() { grep -o '"name":"[^"]*"' "$tmp/$1.out" | cut -d'"' -f4; }

# padroned --instrument: the report on standard output, the original back
run once "$padroned" --pid "$pid" --instrument axpy --for 1.5
check "padroned --instrument axpy --for 1.5: status 0, a report whose axpy ran" \
	eval 'status once 0 && [ "$(ir_of once axpy)" -gt 0 ] &&
	sed -n "s/^# pid $pid: \([0-9.]*\) s instrumented (exhaustive).*/\1/p" "$tmp/once.out" |
		awk "\$1 >= 1.5 { ok = 1 } END { exit !ok }"'
check "then the original is back and the target computes right" eval 'restored && goes_on'
run oncej "$padroned" --pid "$pid" --instrument axpy --for 1 --json --mode sample
check "--json --mode sample: report -j's JSON, axpy's units counted, miss ratios estimated past the units left out" \
	eval 'status oncej 0 && grep -q "^{\"pid\":$pid,\"seconds\":[0-9.]*,\"mode\":\"sample\"," "$tmp/oncej.out" &&
	[ "$(json_names oncej)" = axpy ] && ! says oncej "\"sampled\":" &&
	says oncej "\"estimated\":{\"miss_ratio\":{\"D1\":[0-9.]*,\"LL\":[0-9.]*},\"aged_hits\":{\"I1\":[0-9]*,\"D1\":[1-9][0-9]*," &&
	grep -o "\"units\":[0-9]*" "$tmp/oncej.out" | cut -d: -f2 | awk "\$1 > 0 { n++ } END { exit !n }"'
run onceo "$padroned" --pid "$pid" --instrument axpy --for 1 --output "$tmp/cg.out" --D1 1024,2,64
check "--output FILE --D1: cachegrind.out with fn=axpy and that D1, nothing on stdout, no temporary left" \
	eval 'status onceo 0 && ! [ -s "$tmp/onceo.out" ] && grep -q "^fn=axpy$" "$tmp/cg.out" &&
	grep -q "^desc: D1 cache: *1024 B, 64 B, 2-way associative$" "$tmp/cg.out" &&
	! ls "$tmp"/cg.out.tmp* >/dev/null 2>&1 && restored'
run oncea "$padroned" --pid "$pid" --instrument axpy --for 1 --analyses edges
check "--analyses edges: the blocks analysis, axpy's edges listed, its loop entered and iterated" \
	eval 'status oncea 0 && says oncea "^# blocks analysis: Ir alone" && says oncea "^# edges of axpy" &&
	says oncea "^ *[1-9][0-9]* *loop 0x[0-9a-f]* depth 1, 1 blocks, entered [1-9][0-9]*, [1-9][0-9]* iterations" &&
	restored'

# SIGTERM during --for: the report so far, the original back, early
: >"$tmp/term.out"
"$padroned" --pid "$pid" --instrument axpy --for 600 >"$tmp/term.out" 2>"$tmp/term.err" &
dpid=$!
i=0	# until the copy is in
while restored && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
kill -TERM "$dpid"
i=0
while kill -0 "$dpid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
wait "$dpid"
echo $? >"$tmp/term.st"
dpid=
name=term
check "SIGTERM during --for 600: padroned ends, status 0, names the signal" \
	eval 'status term 0 && says term "padroned: Terminated: detaching from process $pid"'
check "and prints the report of what it recorded" eval '[ "$(ir_of term axpy)" -gt 0 ]'
check "and the original is back, the target computes right" eval 'restored && goes_on'

# padrone's instrument --for, one shot (no padroned)
run pfor "$padrone" -p "$pid" instrument --for 1 axpy
check "padrone -p PID instrument --for 1 axpy: the report, the original back" \
	eval 'status pfor 0 && [ "$(ir_of pfor axpy)" -gt 0 ] && restored'
# several functions at once: each is in the report, or refused saying why
# (work and main: each refused or instrumented on its own merits)
several() {
	status sev 0 && [ "$(ir_of sev axpy)" -gt 0 ] && restored &&
	for f in work main; do
		awk -v f=$f '$10 == f' "$tmp/sev.out" | grep -q . ||
			grep -q "^padrone: $f not instrumented: ." "$tmp/sev.err" || return 1
	done
}
run sev "$padrone" -p "$pid" instrument --for 1 axpy work main
check "instrument --for 1 axpy work main: axpy reported, each other one reported or refused with a reason" \
	several
run hot "$padrone" -p "$pid" instrument --hot 2 --for 1 -j
hot_two() {
	status hot 0 && [ "$(json_names hot | wc -l)" -ge 1 ] &&
	[ $(($(json_names hot | wc -l) + $(grep -c " not instrumented: ." "$tmp/hot.err"))) = 2 ]
}
check "instrument --hot 2 --for 1 -j: the 2 hottest each instrumented or refused with a reason" \
	hot_two
check "after --hot, the target computes right" eval 'restored && goes_on'

# through padroned: read-only commands run during --for's wait (no "busy"),
# ^C in the client ends the wait early with the report, the original back
: >"$tmp/d.out"
"$padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
dpid=$!
i=0
while ! grep -q "padroned: serving" "$tmp/d.out" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
"$padrone" -p "$pid" instrument --for 600 axpy >"$tmp/rfor.out" 2>"$tmp/rfor.err" &
cpid=$!
i=0
while restored && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
run rinfo "$padrone" -p "$pid" info replacements
run rstats "$padrone" -p "$pid" stats
check "info replacements and stats during a client's instrument --for in padroned: answered, not busy" \
	eval 'status rinfo 0 && status rstats 0 && grep -q "^axpy  *exhaustive  *0x" "$tmp/rinfo.out" &&
	! says rinfo busy && ! says rstats busy && kill -0 $cpid'
kill -INT "$cpid"
i=0
while kill -0 "$cpid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
wait "$cpid"
echo $? >"$tmp/rfor.st"
name=rfor
check "^C in the client ends padroned's --for 600 early: status 0, the report, the original back" \
	eval 'status rfor 0 && [ "$(ir_of rfor axpy)" -gt 0 ] && restored'
run rdet "$padrone" -p "$pid" detach
wait "$dpid"
dpid=
check "padroned detached, the target computes right" eval 'status rdet 0 && goes_on'

# info replacements: the instrumented function, its mode, copy and age
run info "$padrone" -p "$pid" instrument -m sample axpy \; info replacements
check "info replacements lists axpy instrumented: sample mode, entry, copy address, since" \
	eval 'status info 0 && grep -q "^axpy  *sample  *0x0*$(printf %x $entry)  *0x[0-9a-f]\{16\}  *[0-9.]* s ago$" "$tmp/info.out"'

# bad input: status 2, the cause named, the process untouched
untouched() { status "$1" 2 && says "$1" "$2" && restored; }
run bana "$padroned" --pid "$pid" --instrument axpy --for 1 --analyses edges,nope
check "--analyses edges,nope: status 2, names the analysis it does not know" \
	untouched bana "unknown analysis 'nope'"
run bfor0 "$padroned" --pid "$pid" --instrument axpy --for 0
check "--for 0: status 2, names --for" untouched bfor0 "--for SECONDS must be a number"
run bforx "$padroned" --pid "$pid" --instrument axpy --for soon
check "--for soon: status 2, names --for" untouched bforx "--for SECONDS must be a number"
run bfor "$padroned" --pid "$pid" --instrument axpy
check "--instrument without --for: status 2, says --for is needed" \
	untouched bfor "needs --for SECONDS"
run pfor0 "$padrone" -p "$pid" instrument --for -1 axpy
check "instrument --for -1: status 2, names --for" untouched pfor0 "--for SECONDS must be a number"
run nof "$padroned" --pid "$pid" --instrument no_such_function --for 1
check "an unknown function: status 2, named, no report" \
	eval 'untouched nof "no function named no_such_function" && ! [ -s "$tmp/nof.out" ]'
run uni "$padrone" -p "$pid" instrument axpy \; uninstrument work
check "uninstrument of a function not instrumented: status 2, named" \
	untouched uni "work is not instrumented"
run un0 "$padrone" -p "$pid" uninstrument
check "uninstrument of nothing: status 2, says so" untouched un0 "nothing is instrumented"
run rep0 "$padrone" -p "$pid" report
check "report with nothing instrumented: status 2, says so" \
	untouched rep0 "nothing was instrumented"
run jnof "$padrone" -p "$pid" instrument -j axpy
check "instrument -j without --for: status 2, says report prints it" \
	untouched jnof "without --for, use report"
# a function already replaced (by an equivalent axpy built as a user would)
cat >"$tmp/alt.c" <<'EOF'
void axpy(long a, const long *x, const long *y, long *o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = a * x[i] + y[i];
}
EOF
if ${CC:-cc} -O1 -fPIC -c -o "$tmp/alt.o" "$tmp/alt.c" 2>/dev/null; then
	run repl "$padrone" -p "$pid" replace axpy "$tmp/alt.o" \; instrument axpy
	check "instrument of a function replaced: status 2, says it is replaced" \
		eval 'status repl 2 && says repl "axpy is already replaced" && goes_on'
	"$padrone" -p "$pid" restore axpy >/dev/null	# replacements outlive a detach
else
	skip "instrument of a function replaced" "no C compiler"
fi
check "the original is back, the target computes right after all that" \
	eval 'restored && goes_on'

# the process's end during --for: the report of what was recorded, then
# status 9 naming the exit, no other error (nothing left to put back)
"$b/tests/targets/instr_kernel" 2 1000 >"$tmp/out2" 2>&1 &
pid2=$!
i=0
while ! grep -q '^alive' "$tmp/out2" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
"$padroned" --pid "$pid2" --instrument axpy --for 600 >"$tmp/gone.out" 2>"$tmp/gone.err" &
dpid=$!
base2=0x$(awk '$6 ~ /instr_kernel$/ { split($1, a, "-"); print a[1]; exit }' /proc/$pid2/maps)
entry2=$((base2 + axpy))
i=0	# until the copy is in
while [ "$(code $entry2 $pid2)" = "$orig" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 "$pid2"
i=0
while kill -0 "$dpid" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
wait "$dpid"
echo $? >"$tmp/gone.st"
dpid=
name=gone
check "the process killed during --for 600: its report, then status 9, one message naming the exit" \
	eval 'status gone 9 && [ "$(ir_of gone axpy)" -gt 0 ] &&
	[ "$(cat "$tmp/gone.err")" = "padroned: process $pid2 has exited" ]'

# killed once the pipeline lags (exhaustive: 4 threads wait for a cache
# simulation slower than they are): the report waits for what the rings
# held, so every reference recovered is in its events
"$b/tests/targets/instr_kernel" 4 1000 >"$tmp/out3" 2>&1 &
pid3=$!
i=0
while ! grep -q '^alive' "$tmp/out3" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
"$padroned" --pid "$pid3" --instrument axpy --for 600 --json >"$tmp/lag.out" 2>"$tmp/lag.err" &
dpid=$!
base3=0x$(awk '$6 ~ /instr_kernel$/ { split($1, a, "-"); print a[1]; exit }' /proc/$pid3/maps)
entry3=$((base3 + axpy))
i=0
while [ "$(code $entry3 $pid3)" = "$orig" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1.5
kill -9 "$pid3"
wait "$dpid"
echo $? >"$tmp/lag.st"
dpid=
# the threads' references recovered, and the function's Ir + Dr + Dw
recovered=$(grep -o '"refs":[0-9]*' "$tmp/lag.out" | cut -d: -f2 | awk '{ s += $1 } END { print s + 0 }')
simulated=$(for e in Ir Dr Dw; do grep -o "\"$e\":[0-9]*" "$tmp/lag.out" | head -1 | cut -d: -f2; done |
	awk '{ s += $1 } END { print s + 0 }')
check "killed while the simulation lagged: the report has every reference recovered ($recovered), simulated ($simulated)" \
	eval 'status lag 9 && [ "$recovered" -gt 1000000 ] && [ "$recovered" = "$simulated" ]'
exit 0
