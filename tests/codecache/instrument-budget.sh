#!/bin/sh
# An overhead budget (instrument --max-overhead PCT, issue 11), through
# padroned as a user types it, on instr_kernel with 2 threads calling axpy
# (checking every result themselves between calls, so axpy is hot but not
# all their time): padrone samples the target, estimates what the copy
# costs and keeps the share on well below 1 (recording every reference
# makes axpy many times slower: 5% cannot buy much of it) and above 0;
# stats (text, -j) shows the budget, the share chosen, the estimate and the
# samples behind it; the target computes right; report says it is sampled.
# Bad budgets (0, negative, over 100, not a number, with --duty, nothing
# instrumented) are refused, status 2, naming the cause, the target
# untouched; padroned's one-shot --max-overhead too. A budget of 100%
# chooses more time on than one of 5%. Under a budget padroned's pipeline
# threads yield to the target (niceness 19), and get their own back after.
# On a 20-ns function (axpy over 16 longs), the cost of being switched off
# (the gate's and detour's share of the samples off) is seen: above 0.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
tap_setup cc-instr-budget
echo 1..13
start_kernel 2 1000
axpy=$(entry_of axpy)
orig=$(code $axpy)
start_padroned

run bad0 "$padrone" -p "$pid" instrument --max-overhead 0 axpy
run badn "$padrone" -p "$pid" instrument --max-overhead -5 axpy
run badh "$padrone" -p "$pid" instrument --max-overhead 101 axpy
run badx "$padrone" -p "$pid" instrument --max-overhead 5x axpy
run badd "$padrone" -p "$pid" instrument --duty 20/180 --max-overhead 5 axpy
run none "$padrone" -p "$pid" instrument --max-overhead 5
range="--max-overhead PCT must be a number from 0.1 to 100"
check "--max-overhead 0, -5, 101, 5x, with --duty, with nothing instrumented: status 2 each, the cause named, the target untouched" \
	eval 'status bad0 2 && says bad0 "$range, not .0." && status badn 2 && says badn "$range, not .-5." &&
	status badh 2 && says badh "$range, not .101." && status badx 2 && says badx "$range, not .5x." &&
	status badd 2 && says badd "--duty and --max-overhead exclude each other" &&
	status none 2 && says none "nothing is instrumented to switch" &&
	[ "$(code $axpy)" = "$orig" ] && goes_on'

run ins "$padrone" -p "$pid" instrument --max-overhead 5 axpy
check "instrument --max-overhead 5 axpy: says so, the target right" \
	eval 'status ins 0 && says ins "^overhead budget: 5% (the share on is chosen from the busy time per call and samples" &&
	[ "$(code $axpy)" != "$orig" ] && resumes'

# stats -j until the estimate is made and the share chosen has settled
# (two estimates a few seconds apart agree within 0.1): 90 s at most, the
# target crawling under ASan on a loaded machine
# budget NAME [PCT]: the share on chosen under PCT (5), once estimated
budget() { sed -n "s/.*\"budget\":{\"max_overhead_pct\":${2:-5},\"fraction\":\([0-9.]*\),\"estimate\":{.*/\1/p" "$tmp/$1.out"; }
# agreed [PCT]: the share chosen under PCT agrees with the one read 3 s before
agreed() {
	sleep 3
	run js "$padrone" -p "$pid" stats -j
	f2=$f1 f1=$(budget js "${1:-5}")
	[ -n "$f1" ] && [ -n "$f2" ] && awk -v a="$f1" -v b="$f2" 'BEGIN { exit !(a - b < 0.1 && b - a < 0.1) }'
}
settled() { f1=; poll 90 agreed "$@"; }
check "stats -j: an estimate is made and the share on settles" settled
frac=$(budget js)
check "the share on chosen ($frac) is well below 1 and above 0; so is the time on" \
	eval 'awk -v f="$frac" "BEGIN { exit !(f > 0 && f < 0.5) }" &&
	sed -n "s/.*\"on_fraction\":\([0-9.]*\).*/\1/p" "$tmp/js.out" | awk "{ exit !(\$1 > 0 && \$1 < 0.6) }"'
run txt "$padrone" -p "$pid" stats
check "stats: the budget, the share on, the estimate; the busy time per call and the samples, each with what it rests on" \
	eval 'status txt 0 && says txt "^# overhead budget 5%: on [0-9.]*% of the time; estimated overhead [0-9.]*% (+-[0-9.]*): [0-9.]*% switched off (the gates. and detours. share of the samples off), plus the larger of:$" &&
	says txt "^#   busy time per call [0-9.]*% more than off ([1-9][0-9]* ns against [1-9][0-9]* ns; [1-9][0-9]* calls, the last seconds.)$" &&
	says txt "^#   samples [0-9.]*% ([0-9.]*% of the time in the copies, whose code is [0-9.]*x slower: [0-9.]*% of the CPU time on, [0-9.]*% off); from [0-9]* samples on, [0-9]* off" &&
	says js "\"samples\":{\"on\":[1-9][0-9]*,\"off\":[1-9][0-9]*,"'
# the estimate is what being switched off costs (the gate's and detour's
# samples: axpy takes about a microsecond here, its gate a nanosecond or
# two, so well under 5%) plus the larger of the two measures (axpy's calls are counted:
# the flags are dead at its entry)
larger() {
	sed -n 's/.*"estimate":{"overhead_pct":\([0-9.]*\),"spread_pct":[0-9.]*,"off_pct":\([0-9.]*\),"per_call":{"overhead_pct":\([0-9.]*\),"ns":\([0-9.]*\),"ns_off":\([0-9.]*\),"calls":\([0-9]*\)},"shares":{"overhead_pct":\([0-9.]*\),.*/\1 \2 \3 \4 \5 \6 \7/p' "$tmp/js.out" |
		awk '{ m = $2 + ($3 > $7 ? $3 : $7); exit !(NF == 7 && $1 - m < 0.021 && m - $1 < 0.021 && $2 < 5 && $4 > 0 && $5 > 0 && $6 >= 200) }'
}
check "stats -j: the estimate is off_pct plus the larger of per_call's and shares' overheads; ns, ns_off and the calls behind them given" larger
# a larger budget buys more time on: 100% against 5% (the copy costs many
# times the original here, so 5% sits near the floor, 100% well above it)
# (A budget is a ceiling: the time on may spend it less the estimate's
# spread. On a machine the rest of the suite keeps busy the spread has
# reached 97%, and 100% then buys no more than 5%: that says nothing of the
# choice, and the check is skipped, saying so.)
spread() { sed -n 's/.*"estimate":{"overhead_pct":[0-9.]*,"spread_pct":\([0-9.]*\),.*/\1/p' "$tmp/js.out"; }
run big "$padrone" -p "$pid" instrument --max-overhead 100
bigdesc="instrument --max-overhead 100 (what is instrumented): a larger share on than under 5% ($frac)"
if status big 0 && settled 100 && awk -v s="$(spread)" 'BEGIN { exit !(s >= 50) }'; then
	if resumes; then
		skip "$bigdesc" "the estimate's spread is $(spread)%: the machine is too busy to tell"
	else
		check "$bigdesc: the target goes on" false
	fi
else
	check "$bigdesc" \
		eval 'status big 0 && settled 100 && awk -v a="$(budget js 100)" -v b="$frac" "BEGIN { exit !(a > b) }" && resumes'
fi
# padroned's pipeline threads (a consumer per ring, the simulator) as
# "NAME:NICENESS"; they set their own as they work (a ring whose thread
# never calls axpy has an idle consumer, which keeps its own), so wait
pipeline_nice() {
	for t in /proc/"$dpid"/task/*; do
		case $(cat "$t/comm" 2>/dev/null) in
		padrone-ring|padrone-sim) awk '{ print $2 ":" $19 }' "$t/stat" 2>/dev/null ;;
		esac
	done | tr -d '()'
}
# yielding: the simulator and both workers' consumers at 19
yielding() { pipeline_nice | awk '/sim:19/ { s++ } /ring:19/ { r++ } END { exit !(s == 1 && r >= 2) }'; }
# none at 19 any more
not_yielding() { ! pipeline_nice | grep -q ':19$'; }
# eventually CONDITION: within 60 s (the threads' niceness, shown if not)
eventually() {
	poll 60 "$1" && return 0
	echo "# the pipeline's threads: $(pipeline_nice | tr '\n' ' ')"
	return 1
}
eventually yielding && under=yes
run on "$padrone" -p "$pid" instrument --on
check "under the budget the pipeline threads yield (niceness 19); switched on by hand, the budget ends and they get their own back" \
	eval '[ "$under" = yes ] && status on 0 && eventually not_yielding && resumes'
run rep "$padrone" -p "$pid" report -j
check "report: sampled, with the fraction and windows; the target right" \
	eval 'status rep 0 && grep -q "\"sampled\":{\"fraction\":0\.[0-9]*,\"windows\":[0-9]*},\"estimated\":{\"miss_ratio\":{\"D1\":[0-9.e+]*,\"LL\":[0-9.e+]*},.*}}$" "$tmp/rep.out" && resumes'
run un "$padrone" -p "$pid" uninstrument
check "uninstrument: the original back, no ring, the target right" \
	eval 'status un 0 && [ "$(code $axpy)" = "$orig" ] && [ "$(rings)" = 0 ] && goes_on'
run det "$padrone" -p "$pid" detach
wait "$dpid" 2>/dev/null
dpid=
check "detached, the target runs on, right" eval 'status det 0 && goes_on'

run once "$padroned" --pid "$pid" --instrument axpy --for 3 --max-overhead 5 --json
run oncebad "$padroned" --pid "$pid" --instrument axpy --for 1 --max-overhead 0
check "padroned --instrument axpy --for 3 --max-overhead 5 --json: sampled; 0: status 2; the target right" \
	eval 'status once 0 && grep -q "\"sampled\":{\"fraction\":0\.[0-9]*,\"windows\":[0-9]*},\"estimated\":{\"miss_ratio\":{\"D1\":[0-9.e+]*,\"LL\":[0-9.e+]*},.*}}$" "$tmp/once.out" &&
	status oncebad 2 && says oncebad "$range" && [ "$(code $axpy)" = "$orig" ] && goes_on && fine'

# a 20-ns function: its gate and detour take a share of its time off that
# the samples see (2-3% here; less under ASan, whose checks slow axpy's
# own code and not the gate's)
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
start_kernel 1 16
start_padroned
off_pct() { sed -n 's/.*"off_pct":\([0-9.]*\),.*/\1/p' "$tmp/js.out"; }
off_seen() {
	run js "$padrone" -p "$pid" stats -j
	awk -v o="$(off_pct)" 'BEGIN { exit !(o > 0 && o < 10) }'
}
run ins16 "$padrone" -p "$pid" instrument --max-overhead 5 axpy
check "axpy over 16 longs under --max-overhead 5: stats -j's off_pct above 0 (the switched-off cost seen), the target right" \
	eval 'status ins16 0 && poll 60 off_seen && resumes'
