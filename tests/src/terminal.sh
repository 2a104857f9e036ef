#!/bin/sh
# On a terminal (a pty from script(1)): profile, measure and instrument
# --for show their progress on standard error and erase it, and so does a
# cfg that takes more than a second (a function of libLLVM, a big module
# read for the first time); in a pipe, nothing of it. top redraws in place and stops on q; piped, -n COUNT
# tables follow one another.
b=$(cd "${top_builddir:-.}" && pwd)
padrone=$b/src/padrone
. "${top_srcdir:-.}/tests/lib/tap.sh"
tap_init terminal
if ! command -v script >/dev/null; then
	echo "1..0 # SKIP no script(1) for a terminal: apt-get install util-linux"
	exit 0
fi
tap_context() { [ -n "${log:-}" ] && od -c "$log" | head -20; }
echo "1..15"
"$b/tests/targets/prof_hot" >/dev/null &
pid=$!
pids=$pid
sleep 0.3
esc=$(printf '\033')

log=$tmp/tty.out
script -qfec "'$padrone' -p $pid profile 2.5" /dev/null </dev/null >"$log" 2>&1
check "on a terminal, profile tells seconds elapsed of the total and samples so far" \
	grep -q "profile: [12]\.[0-9] of 2\.5 s, [0-9]* samples" "$log"
check "and erases that line before the report" grep -q "${esc}\[K# pid $pid" "$log"
log=$tmp/pipe.err
"$padrone" -p $pid profile 1.5 >"$tmp/pipe.out" 2>"$log"
check "in a pipe, no progress at all" sh -c "! grep -q 'profile:' '$log' && ! grep -q '$esc' '$tmp/pipe.out'"
log=$tmp/measure.out
"$b/tests/targets/cc_vecadd" >/dev/null &
vpid=$!
pids="$pids $vpid"
i=0	# until it runs cc_vecadd, not the shell that forked it
while [ "$(readlink /proc/$vpid/exe)" != "$b/tests/targets/cc_vecadd" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
script -qfec "'$padrone' -p $vpid measure -t 1.5 vecadd 16000000" /dev/null </dev/null >"$log" 2>&1
check "on a terminal, measure tells seconds elapsed of the timeout and calls timed so far" \
	grep -q "measure: 1\.[0-9] of 1\.5 s, [0-9]* calls" "$log"
check "and erases that line before its figures" grep -q "${esc}\[Kvecadd: [0-9]* calls, mean" "$log"
log=$tmp/hot.out
script -qfec "'$padrone' -p $pid hot 3" /dev/null </dev/null >"$log" 2>&1
check "hot's profile first (none yet) shows its progress too, erased before the table" \
	sh -c "grep -q 'profile: 1\.[0-9] of 2\.0 s, [0-9]* samples' '$log' &&
		grep -q '${esc}\[K# pid $pid' '$log'"
# instrument --for: seconds of the total and units so far, erased before
# the report; nothing in a pipe
"$b/tests/targets/instr_kernel" 2 1000 >/dev/null &
kpid=$!
pids="$pids $kpid"
i=0
while [ "$(readlink /proc/$kpid/exe)" != "$b/tests/targets/instr_kernel" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
log=$tmp/instr.out
script -qfec "'$padrone' -p $kpid instrument --for 2.5 axpy" /dev/null </dev/null >"$log" 2>&1
check "on a terminal, instrument --for tells seconds elapsed of the total and units so far" \
	grep -q "instrument: [12]\.[0-9] of 2\.5 s, [0-9]* units" "$log"
check "and erases that line before the report" grep -q "${esc}\[K# pid $kpid: " "$log"
log=$tmp/instr.err
"$padrone" -p $kpid instrument --for 1.5 axpy >"$tmp/instr-pipe.out" 2>"$log"
check "instrument --for in a pipe: no progress, the report alone" \
	sh -c "! grep -q 'instrument:' '$log' && ! grep -q '$esc' '$tmp/instr-pipe.out' &&
		grep -q '^# pid $kpid: ' '$tmp/instr-pipe.out'"
log=$tmp/json.out
script -qfec "'$padrone' -p $pid profile -j 1.5" /dev/null </dev/null >"$log" 2>&1
check "JSON on a terminal is JSON alone once the line is erased" \
	sh -c "sed 's/.*${esc}\[K//' '$log' | tr -d '\r' | grep -q '^{\"pid\":$pid,'"

# q once two tables are on the screen (however slow the build), through a fifo
log=$tmp/top.out
mkfifo "$tmp/keys"
timeout 60 script -qfec "'$padrone' -p $pid top -d 1 5" /dev/null <"$tmp/keys" >"$log" 2>&1 &
top=$!
exec 3>"$tmp/keys"
wait_until 300 sh -c "test \$(grep -c 'refresh [0-9]* (q to quit)' '$log') -ge 2"
printf q >&3
wait "$top"
st=$?
exec 3>&-
check "top on a terminal stops on q (status $st)" test "$st" = 0
check "and redraws in place: clear screen, then the table" \
	sh -c "test \$(grep -c '${esc}\[H${esc}\[2Jpadrone top: process $pid, every 1 s, refresh [0-9]* (q to quit)' '$log') -ge 2 &&
		grep -q prof_spin '$log'"
log=$tmp/topn.out
"$padrone" -p $pid top -d 0.5 -n 2 3 >"$log" 2>&1
check "top -n 2 in a pipe: two tables, one after the other, no escapes" \
	sh -c "test \$(grep -c '^padrone top: process $pid, every 0.5 s, refresh [12]$' '$log') = 2 &&
		! grep -q '$esc' '$log' && test \$(grep -c prof_spin '$log') = 2"

# cfg of a function of a big module: libLLVM (clang's, installed with it),
# dlopened by elf_late; its symbols and code read the first time take
# seconds: elapsed seconds on a terminal, erased before the graph
llvm=$(ls /usr/lib/x86_64-linux-gnu/libLLVM-*.so.1 2>/dev/null | head -1)
if [ -z "$llvm" ]; then
	for k in 1 2; do n=$((n + 1)); echo "ok $n # SKIP no libLLVM here"; done
	exit 0
fi
"$b/tests/targets/elf_late" "$llvm" >"$tmp/late.out" 2>&1 &
lpid=$!
pids="$pids $lpid"
wait_until 300 grep -q '^ready' "$tmp/late.out"
kill -USR1 "$lpid"
wait_until 300 grep -q '^loaded' "$tmp/late.out"
log=$tmp/cfg.out
t0=$(date +%s%N)
script -qfec "'$padrone' -p $lpid cfg LLVMBuildAdd" /dev/null </dev/null >"$log" 2>&1
took=$((($(date +%s%N) - t0) / 1000000))
if [ "$took" -lt 1500 ]; then	# too quick here to be shown
	n=$((n + 1))
	echo "ok $n # SKIP cfg took $took ms"
else
	check "on a terminal, a cfg that takes seconds ($took ms) tells them, erased before the graph" \
		sh -c "grep -q 'cfg: [1-9][0-9]*\.[0-9] s' '$log' &&
			grep -q '${esc}\[Kfunction LLVMBuildAdd at ' '$log'"
fi
log=$tmp/cfg.err
"$padrone" -p $lpid cfg LLVMBuildAdd >"$tmp/cfg-pipe.out" 2>"$log"
check "cfg in a pipe: the graph alone, nothing on standard error" \
	sh -c "test ! -s '$log' && ! grep -q '$esc' '$tmp/cfg-pipe.out' &&
		grep -q '^function LLVMBuildAdd at ' '$tmp/cfg-pipe.out' && kill -0 $lpid"
exit 0
