#!/bin/sh
# measure and replace/restore under thread churn (tests/targets/threads
# -n 8: threads born and joined all the time, each calling work()): 40
# runs, every one succeeds (a thread on its way out is no one's to stop),
# and the target's own checks of work()'s results stay at 0 errors.
b=${top_builddir:-.}
padrone=$b/src/padrone
obj=$b/tests/codecache/repl/threads_work_alt.o
. "$(dirname "$0")/tap.sh"
tap_setup cc-churn
"$b/tests/targets/threads" -n 8 -w 2000 -t 200 >"$tmp/out" 2>&1 &
pid=$!
i=0
while ! grep -q '^ready' "$tmp/out" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done

echo "1..3"
failed=0
k=0
while [ $k -lt 20 ]; do
	k=$((k + 1))
	run measure "$padrone" -p "$pid" measure -t 0.3 work 20
	if ! status measure 0; then
		failed=$((failed + 1))
		sed 's/^/# measure: /' "$tmp/measure.err"
	fi
	run replace "$padrone" -p "$pid" replace work "$obj" ';' restore work
	if ! status replace 0; then
		failed=$((failed + 1))
		sed 's/^/# replace: /' "$tmp/replace.err"
	fi
done
check "40 measure and replace/restore runs under thread churn all succeed" [ $failed -eq 0 ]
# two ticks after the last run: the target's own count of wrong results
have=$(grep -c '^tick' "$tmp/out")
i=0
while [ "$(grep -c '^tick' "$tmp/out")" -lt $((have + 2)) ] && [ $i -lt 150 ]; do
	sleep 0.1
	i=$((i + 1))
done
check "the target computed every work() right meanwhile" \
	eval 'tail -1 "$tmp/out" | grep -q "errors 0$" && ! grep -q "errors [1-9]" "$tmp/out"'
check "and it still runs" kill -0 "$pid"
