#!/bin/sh
# instr-redis: what live instrumentation costs redis-server (issue 10's
# redis row). redis-server on loopback (its own directory, no persistence)
# under redis-benchmark; its hottest function of its own (profile -u under
# load, the first that instrument takes) instrumented by a one-shot
# `padrone -p PID instrument --for`, at each analysis level in turn
# (record: REP units, the consumer counts them; refs: + recovery; cache:
# + full cache simulation, exhaustive mode), then with the cache simulated
# on 10% and 1% of the time (--duty), under --max-overhead 5 and 10 (10 s
# to choose first) and in CAB's sampling mode (issue 11), native rounds
# between them.
# The rate is redis-benchmark's requests per second (SET and GET, 4
# clients, the mean of the two); each row's ratio is to the mean of the
# native rounds beside it; the load average is printed with each row, and
# the share of the time it was on where it was switched, and where the
# cache was simulated the function's D1 and LL miss ratios of data
# references (sampled: also as the report estimates them for the whole
# time), the estimates of 10% and 1% on and of sampling mode against the
# exhaustive run's (issue 11: results sampled in time agree with it).
# usage: instr-redis.sh [ROUNDS]   (default 2)
b=${top_builddir:-.}
padrone=$b/src/padrone
rounds=${1:-2}
for p in redis-server redis-benchmark redis-cli; do
	command -v $p >/dev/null || { echo "instr-redis: no $p (apt-get install redis-server redis-tools)"; exit 0; }
done
tmp=$(mktemp -d /tmp/padrone-bench-redis.XXXXXX)
port=$((20000 + $$ % 20000))
pid= load=
cleanup() {
	[ -n "$load" ] && kill "$load" 2>/dev/null
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 1" INT TERM
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
	--daemonize no >"$tmp/server.out" 2>&1 &
pid=$!
i=0
until redis-cli -p "$port" ping >/dev/null 2>&1 || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done

# requests per second: the mean of SET's and GET's
rate() {
	redis-benchmark -p "$port" -n "${1:-40000}" -c 4 -r 100000 -t set,get -q 2>/dev/null |
		tr '\r' '\n' | sed -n 's/^\(SET\|GET\): \([0-9.]*\) requests per second.*/\2/p' |
		awk '{ s += $1; n++ } END { if (n) printf "%.0f\n", s / n; else print 0 }'
}
loadavg() { cut -d' ' -f1 /proc/loadavg; }

# the hottest of redis's own functions that instrument takes
( while :; do redis-benchmark -p "$port" -n 20000 -c 4 -t set,get -q >/dev/null 2>&1; done ) &
load=$!
sleep 1	# the clients connected
"$padrone" -p "$pid" profile -u -j 5 >"$tmp/prof.json" 2>"$tmp/prof.err"
kill "$load"; wait "$load" 2>/dev/null; load=
exe=$(basename "$(readlink "/proc/$pid/exe")")
func=
for f in $(grep -o '"name":"[^"]*","module":"[^"]*"' "$tmp/prof.json" |
	   sed -n "s|\"name\":\"\\([^\"]*\\)\",\"module\":\"[^\"]*/$exe\"|$exe:\\1|p" | head -10); do
	if "$padrone" -p "$pid" instrument -a record --for 0.2 "$f" >/dev/null 2>&1; then
		func=$f
		break
	fi
done
[ -n "$func" ] || { echo "instr-redis: none of redis's hottest functions could be instrumented" \
	"(profile: $(head -c 300 "$tmp/prof.json") $(cat "$tmp/prof.err"))"; exit 1; }
echo "redis-server under redis-benchmark (SET+GET, 4 clients, loopback): $func instrumented"

# instrumented LEVEL SETTLE [OPTION...]: the rate while instrumented at
# LEVEL with OPTIONs, SETTLE seconds after the one-shot began (which
# runs longer than the measure)
instrumented() {
	level=$1 settle=$2
	shift 2
	"$padrone" -p "$pid" instrument -a "$level" --for $((settle + 10)) "$@" "$func" \
		>"$tmp/once.out" 2>&1 &
	once=$!
	sleep "$settle"	# attached and instrumented (the one-shot says nothing before its report)
	r=$(rate)
	wait "$once" || { echo "  $level $*: instrument failed: $(tail -1 "$tmp/once.out")" >&2; r=0; }
	# the share of the time it was on, as the report says (duty cycles, budgets)
	sed -n 's/.*sampled: switched on \([0-9.]*\)% of the time.*/\1/p' "$tmp/once.out" |
		head -1 >"$tmp/on"
	echo "$r"
}
# the function's D1 and LL miss ratios of data references (%) in the last
# one-shot's report, as "D1 LL": as measured (its row), and as the report
# estimates them for the whole time when it was switched off at times
# (its "estimated for the whole time" line; else as measured)
ratios() {
	awk '$NF == "where" { getline; refs = $4 + $7
		if (NF >= 10 && refs > 0) printf "%.4f %.4f\n", 100 * ($5 + $8) / refs, 100 * ($6 + $9) / refs
		exit }' "$tmp/once.out"
}
estimated() {
	e=$(sed -n 's/.*estimated for the whole time: data miss ratios D1 \([0-9.]*\)%, LL \([0-9.]*\)%.*/\1 \2/p' \
		"$tmp/once.out" | head -1)
	echo "${e:-$(ratios)}"
}
row() {	# row NAME RATE NATIVE [ON% [D1 LL [ESTIMATED_D1 LL]]]
	awk -v n="$1" -v r="$2" -v nat="$3" -v l="$(loadavg)" -v on="$4" -v mr="$5" -v est="$6" \
		'BEGIN { split(mr, m, " "); split(est, e, " ")
			 printf "  %-28s %9.0f req/s %7.2fx   (load %s%s%s%s)\n", n, r, (r > 0 ? nat / r : 0), l,
			 on != "" ? ", on " on "% of the time" : "",
			 mr != "" ? sprintf(", D1 miss %s%% LL %s%%", m[1], m[2]) : "",
			 est != "" && est != mr ? sprintf(", estimated D1 %s%% LL %s%%", e[1], e[2]) : "" }'
}
# against NAME D1_LL EXHAUSTIVE_D1_LL: the relative differences of a
# sampled run's miss ratios to the exhaustive run's (in points where that
# is below 0.1%, as bench/instr-duty gives them)
against() {
	echo "$2 $3" | awk -v n="$1" '
		function rel(x, y) { return y >= 0.1 ? sprintf("%+.1f%%", 100 * (x - y) / y) : sprintf("%+.4f points", x - y) }
		NF == 4 { printf " %s: D1 %s LL %s;", n, rel($1, $3), rel($2, $4) }'
}
for k in $(seq "$rounds"); do
	echo "round $k"
	n0=$(rate)
	row native "$n0" "$n0"
	for level in record refs cache duty10 duty1 budget5 budget10 sample; do
		rm -f "$tmp/on"
		case $level in
		record) name="REP record, consumer counts" r=$(instrumented record 2) ;;
		refs) name="+ recovery" r=$(instrumented refs 2) ;;
		cache) name="+ cache simulation" r=$(instrumented cache 2) ;;
		duty10) name="cache, on 10% (20/180 ms)" r=$(instrumented cache 2 --duty 20/180) ;;
		duty1) name="cache, on 1% (2/198 ms)" r=$(instrumented cache 2 --duty 2/198) ;;
		budget5) name="cache, --max-overhead 5" r=$(instrumented cache 10 --max-overhead 5) ;;
		budget10) name="cache, --max-overhead 10" r=$(instrumented cache 10 --max-overhead 10) ;;
		sample) name="cache, CAB sampling mode" r=$(instrumented cache 2 -m sample) ;;
		esac
		mr= est=	# the exhaustive run's ratios, and the sampled ones against them
		case $level in
		cache) mr=$(ratios) full=$mr ;;
		duty10) mr=$(ratios) est=$(estimated) d10=$est ;;
		duty1) mr=$(ratios) est=$(estimated) d1=$est ;;
		sample) mr=$(ratios) est=$(estimated) smp=$est ;;
		esac
		n1=$(rate)	# after uninstrument: native again, beside it
		nat=$(( (n0 + n1) / 2 ))
		row "$name" "$r" "$nat" "$(cat "$tmp/on" 2>/dev/null)" "$mr" "$est"
		n0=$n1
	done
	row "after uninstrument" "$n0" "$nat"
	echo "  miss ratios as estimated for the whole time against the exhaustive run's (goal within 5%):$(against "10% on" "$d10" "$full")$(against "1% on" "$d1" "$full")$(against "sampling mode" "$smp" "$full")"
done
