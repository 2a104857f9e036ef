# tests/codecache/tap.sh: what the shell tests of live patching share
# (sourced, after setting b, the build directory): tap_setup NAME makes
# $tmp (a private directory, padroned's run directory in it, mode 0700 as
# padroned wants it) and removes it at exit, killing the target $pid and
# the padroned $dpid (started by the test, or by start_target and
# start_padroned below) if they still run.

tap_setup() {
	tmp=$(mktemp -d "/tmp/padrone-$1.XXXXXX")
	PADRONE_RUNDIR=$tmp/run
	export PADRONE_RUNDIR
	mkdir -m 700 "$PADRONE_RUNDIR"
	pid=
	dpid=
	trap tap_cleanup EXIT
}
tap_cleanup() {
	[ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}

n=0
check() {	# check DESCRIPTION COMMAND...: one TAP line
	n=$((n + 1))
	d=$1
	shift
	if "$@"; then
		echo "ok $n - $d"
	else	# with what the last command run said, and the target's last lines
		echo "not ok $n - $d"
		[ -n "${name:-}" ] && cat "$tmp/$name.out" "$tmp/$name.err" 2>/dev/null | sed 's/^/# /'
		tail -5 "$tmp/out" 2>/dev/null | sed 's/^/# target: /'
		tap_died
	fi
}
# how the target ended, if it did (status 128 + N: killed by signal N)
tap_died() {
	[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null || return 0
	wait "$pid" 2>/dev/null
	tap_st=$?
	[ "$tap_st" = 127 ] && return 0	# reaped already
	if [ "$tap_st" -gt 128 ]; then
		echo "# target: killed by signal $((tap_st - 128)) ($(kill -l $((tap_st - 128)) 2>/dev/null))"
	else
		echo "# target: exited, status $tap_st"
	fi
}
skip() {	# skip DESCRIPTION REASON
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}
run() {	# run NAME ARGS...: stdout, stderr and status into $tmp/NAME.*
	name=$1
	shift
	"$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	echo $? >"$tmp/$name.st"
}
says() { grep -q -- "$2" "$tmp/$1.out" "$tmp/$1.err"; }
status() { [ "$(cat "$tmp/$1.st")" = "$2" ]; }
# poll SECONDS COMMAND...: run COMMAND every 0.1 s until it succeeds
# (status 0) or SECONDS have passed (status 1). Waits for a condition, never
# for a fixed time: generous bounds, for ASan on a loaded machine.
poll() {
	tap_end=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -ge $tap_end ] && return 1
		sleep 0.1
	done
}
# wait_for PATTERN [N [HAVE]]: until the target has printed N (default 1)
# more lines matching PATTERN than HAVE (default: when called), 30 s at most
wait_for() {
	tap_pat=$1 tap_want=$((${3:-$(grep -c -- "$1" "$tmp/out")} + ${2:-1}))
	poll 30 eval '[ "$(grep -c -- "$tap_pat" "$tmp/out")" -ge $tap_want ]'
}
# the target still runs and has reported nothing wrong
fine() { kill -0 "$pid" 2>/dev/null && ! grep -q BAD "$tmp/out"; }
# code ADDR [PID]: the first 8 bytes there of the target (or PID), in hex
code() { dd if="/proc/${2:-$pid}/mem" bs=1 skip=$(($1)) count=8 2>/dev/null | od -An -tx1 | tr -d ' \n'; }

# ------------------------------------------------- targets and padroned
# (the functions' own variables start with tap_, clear of the tests')

# start_target PROGRAM ARGS...: the target in the background ($pid, its
# output in $tmp/out), once it has printed two "alive" lines (30 s at most)
start_target() {
	: >"$tmp/out"	# there before wait_for reads it
	"$@" >"$tmp/out" 2>&1 &
	pid=$!
	wait_for '^alive' 2 0
}
# start_kernel ARGS...: start_target tests/targets/instr_kernel ARGS; $base:
# where its program is mapped
start_kernel() {
	start_target "$b/tests/targets/instr_kernel" "$@"
	base=0x$(awk '$6 ~ /instr_kernel$/ { split($1, a, "-"); print a[1]; exit }' "/proc/$pid/maps")
}
# entry_of FUNC: FUNC's address in the running instr_kernel, in decimal
entry_of() {
	echo $((base + 0x$(nm "$b/tests/targets/instr_kernel" | awk -v f="$1" '$3 == f { print $1 }')))
}
# start_padroned [VAR=VALUE...]: padroned --pid $pid in the background, in
# that environment ($dpid, its output in $tmp/d.out), once it says it
# serves (30 s at most)
start_padroned() {
	: >"$tmp/d.out"
	env "$@" "${padroned:-$b/src/padroned}" --pid "$pid" >"$tmp/d.out" 2>&1 &
	dpid=$!
	poll 30 grep -q "padroned: serving" "$tmp/d.out"
}

# instr_kernel's and instr_oracle's "alive CALLS bad MISMATCHES" lines: the
# last one's calls
# and mismatches
calls() { grep '^alive' "$tmp/out" | tail -1 | cut -d' ' -f2; }
bad() { grep '^alive' "$tmp/out" | tail -1 | sed -n 's/^alive [0-9]* bad \([0-9]*\)$/\1/p'; }
# goes_on: three more alive lines, more calls made, none wrong
goes_on() {
	tap_c=$(calls)
	wait_for '^alive' 3 && [ "$(calls)" -gt "$tap_c" ] && [ "$(bad)" = 0 ]
}
# resumes: more calls made within 30 s, none wrong, the target alive -- for
# when its threads may wait a while first (for a killed consumer's
# heartbeat to go stale, say), its alive lines coming meanwhile
resumes() {
	tap_c=$(calls)
	poll 30 eval '[ "$(calls)" -gt "$tap_c" ]' && [ "$(bad)" = 0 ] && kill -0 "$pid"
}
# the target's instrumentation rings mapped
rings() { grep -c 'memfd:padrone-ring' "/proc/$pid/maps"; }

# instr_signals and instr_oracle stop their calls at SIGUSR1 (saying
# "paused") and go on at the next (saying "alive"): instrument and
# uninstrument then see no call under way
pause() {
	tap_seen=$(grep -c '^paused' "$tmp/out")
	kill -USR1 "$pid" && wait_for '^paused' 1 "$tap_seen"
}
resume() {
	tap_seen=$(grep -c '^alive' "$tmp/out")
	kill -USR1 "$pid" && wait_for '^alive' 1 "$tap_seen"
}
