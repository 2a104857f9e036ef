# tests/codecache/tap.sh: what the shell tests of live patching share
# (sourced): tap_setup NAME makes $tmp (a private directory, padroned's
# run directory in it) and removes it at exit, killing the target $pid
# (started by the test, its output in $tmp/out) if it still runs.

tap_setup() {
	tmp=$(mktemp -d "/tmp/padrone-$1.XXXXXX")
	PADRONE_RUNDIR=$tmp/run
	export PADRONE_RUNDIR
	mkdir -p "$PADRONE_RUNDIR"
	pid=
	trap tap_cleanup EXIT
}
tap_cleanup() {
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
# wait_for PATTERN [N [HAVE]]: until the target has printed N (default 1)
# more lines matching PATTERN than HAVE (default: when called), 30 s at most
wait_for() {
	have=${3:-$(grep -c -- "$1" "$tmp/out")}
	i=0
	while [ "$(grep -c -- "$1" "$tmp/out")" -lt $((have + ${2:-1})) ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 300 ]
}
# the target still runs and has reported nothing wrong
fine() { kill -0 "$pid" 2>/dev/null && ! grep -q BAD "$tmp/out"; }
# code ADDR [PID]: the first 8 bytes there of the target (or PID), in hex
code() { dd if="/proc/${2:-$pid}/mem" bs=1 skip=$(($1)) count=8 2>/dev/null | od -An -tx1 | tr -d ' \n'; }
