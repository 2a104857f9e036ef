#!/bin/sh
# Continuous profiling: padroned --every SECONDS --out DIR --keep N writes a
# pprof file per period while it serves, the directory bounded, files renamed
# into place; --pidof NAME follows a service across a restart; SIGTERM ends
# it cleanly with the target running on, untraced.
b=$(cd "${top_builddir:-.}" && pwd)
padrone=$b/src/padrone
padroned=$b/src/padroned
. "${top_srcdir:-.}/tests/lib/tap.sh"
tap_init continuous
PADRONE_RUNDIR=$tmp/run
export PADRONE_RUNDIR
mkdir -m 700 "$PADRONE_RUNDIR"
tap_context() { cat "$tmp/d.out" 2>/dev/null; }
files() { ls "$tmp/out" 2>/dev/null | grep -c '^padrone-.*\.pb\.gz$'; }
untraced() {	# the target runs on: not stopped, no tracer
	grep -q '^TracerPid:[[:space:]]*0$' "/proc/$1/status" &&
		! grep -q '^State:[[:space:]]*[tT]' "/proc/$1/status"
}
echo "1..13"

# A service with a name of its own, so --pidof finds only it.
svc=psvc$$
cp "$b/tests/targets/prof_hot" "$tmp/$svc"
"$tmp/$svc" >"$tmp/t1.out" &
t1=$!
pids="$t1"

"$padroned" --pidof "$svc" --every 1 --out "$tmp/out" --keep 3 >"$tmp/d.out" 2>&1 &
dpid=$!
pids="$pids $dpid"
check "padroned --pidof finds the service and serves it" \
	wait_until 100 grep -q "serving process $t1 " "$tmp/d.out"
check "a period's pprof file appears" wait_until 150 sh -c "ls '$tmp/out' 2>/dev/null | grep -q pb.gz"
# while it writes, at most one file more than --keep (renamed, then pruned)
most=0
for i in $(seq 20); do
	c=$(files)
	[ "$c" -gt "$most" ] && most=$c
	sleep 0.2
done
check "the directory stays bounded while it runs (at most $most files)" \
	test "$most" -ge 3 -a "$most" -le 4
"$padrone" -p "$t1" profile -j 1 >"$tmp/p.out" 2>&1
check "padroned still serves commands while it profiles" \
	sh -c "grep -q '\"name\":\"prof_spin\"' '$tmp/p.out' && test -S '$PADRONE_RUNDIR/padroned-$t1.sock'"

# The service restarts: padroned follows it to its new PID.
kill -9 "$t1"
"$tmp/$svc" >"$tmp/t2.out" &
t2=$!
pids="$pids $t2"
check "after a restart padroned serves the new process" \
	wait_until 150 grep -q "serving process $t2 " "$tmp/d.out"
check "and writes its files" wait_until 150 sh -c "ls '$tmp/out' 2>/dev/null | grep -q -- '-$t2-'"
check "padrone finds the new process's padroned" \
	sh -c "'$padrone' -p $t2 info threads 2>&1 | grep -q '$svc'"

# SIGTERM (systemctl stop): a clean exit, the target untouched and running.
before=$(grep -c '^rate' "$tmp/t2.out")
kill -TERM "$dpid"
wait "$dpid"
st=$?
check "SIGTERM: padroned exits 0 and says it detached (status $st)" \
	sh -c "test $st = 0 && grep -q 'Terminated: detaching from process $t2' '$tmp/d.out'"
check "the service runs on, untraced, its checksum unchanged" \
	sh -c "sleep 0.5; test \$(grep -c '^rate' '$tmp/t2.out') -gt $before &&
		! grep -q BAD '$tmp/t2.out' && test -d /proc/$t2" && untraced "$t2"

# What is left: the newest 3 complete files, the last one readable.
check "the directory keeps the newest 3 files ($(files))" test "$(files)" = 3
check "no temporary file is left beside them" \
	test -z "$(ls "$tmp/out" 2>/dev/null | grep -v '\.pb\.gz$')"
# the newest by time: by name, files of a PID that wrapped around to a
# smaller number sort before the first process's
f=$(ls -t "$tmp/out" 2>/dev/null | head -1)
check "a file is gzip, named service-PID-time" \
	sh -c "echo '$f' | grep -q '^padrone-$svc-$t2-[0-9]\{8\}T[0-9]\{6\}\.[0-9]\{3\}Z\.pb\.gz$' &&
		gzip -t '$tmp/out/$f'"
if [ -x "$b/tests/src/pprof" ]; then	# built by export.sh when it can be
	top=$("$b/tests/src/pprof" -top -symbolize=none -sample_index=samples "$tmp/out/$f" 2>&1 |
		awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $6; exit }')
	check "pprof reads it: the hottest function is prof_spin ($top)" test "$top" = prof_spin
else
	n=$((n + 1))
	echo "ok $n # SKIP no pprof tool (tests/src/export.sh builds it)"
fi
exit 0
