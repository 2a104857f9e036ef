# tap.sh: what the shell tests share, sourced after setting b (the build
# directory): a private temporary directory ($tmp) removed at exit with
# every process listed in $pids killed, one TAP line per check, and bounded
# waits.
#
#   . "$top_srcdir/tests/lib/tap.sh"; tap_init NAME
#   check "what must hold" COMMAND...	# "ok N - ..." or "not ok N - ..."
#   tap_context() { ...; }		# printed after a "not ok" (optional)
tap_init() {
	tmp=$(mktemp -d "/tmp/padrone-$1.XXXXXX")
	pids=
	n=0
	trap tap_cleanup EXIT
}
tap_cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
tap_context() { :; }
check() {	# check DESCRIPTION COMMAND...
	n=$((n + 1))
	d=$1
	shift
	if "$@"; then
		echo "ok $n - $d"
	else
		echo "not ok $n - $d"
		tap_context | sed 's/^/# /'
	fi
}
wait_until() {	# wait_until TENTHS COMMAND...: poll until it succeeds
	t=$1
	shift
	i=0
	until "$@" || [ $i -ge "$t" ]; do sleep 0.1; i=$((i + 1)); done
	"$@"
}
