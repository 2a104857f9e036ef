#!/bin/sh
# Bash completion of function names (packaging/padrone.bash): from the last
# profile of the padroned serving the process (hot -n, which never samples),
# else from the symbols of the process's program (nm); never by attaching.
# An nm that finds nothing ($tmp/nonm/nm) tells where the names came from.
b=$(cd "${top_builddir:-.}" && pwd)
s=$(cd "${top_srcdir:-.}" && pwd)
padrone=$b/src/padrone
. "$s/tests/lib/tap.sh"
tap_init completion
if ! command -v bash >/dev/null || ! command -v nm >/dev/null; then
	echo "1..0 # SKIP needs bash and nm (binutils)"
	exit 0
fi
tap_context() { [ -n "${log:-}" ] && cat "$log"; tail -3 "$tmp/target.out"; }
echo "1..7"
export PADRONE_RUNDIR=$tmp/run
# padroned answers slowly under ASan on a loaded machine: not a completion's 2 s
export PADRONE_COMPLETION_TIMEOUT=60
mkdir -m 700 "$PADRONE_RUNDIR"
mkdir "$tmp/nonm"
printf '#!/bin/sh\nexit 1\n' >"$tmp/nonm/nm"
chmod +x "$tmp/nonm/nm"
"$b/tests/targets/prof_hot" >"$tmp/target.out" &
pid=$!
pids=$pid
wait_until 300 grep -q '^ready' "$tmp/target.out"

# complete [PATHDIR] WORDS...: what _padrone offers for the last word
complete() {
	dir=
	[ "$1" = nonm ] && dir=$tmp/nonm: && shift
	PATH=$dir$b/src:$PATH bash -c '
		. "$1/packaging/padrone.bash"
		shift
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _padrone padrone
		echo "${COMPREPLY[*]}"' complete "$s" "$@"
}
log=$tmp/log
{
	echo "1 $(complete padrone -p "$pid" cfg prof_s)"
	echo "2 $(complete padrone -p "$pid" measure -f -t 10 prof_s)"
	echo "3 $(complete nonm padrone -p "$pid" cfg prof_s)"
} >"$log"
check "without padroned: a function of the program, from its symbols (cfg, measure -t 10)" \
	sh -c "grep -qx '1 prof_spin' '$log' && grep -qx '2 prof_spin' '$log' && grep -qx '3 ' '$log'"
check "and the process was never attached (no tracer), runs on right" \
	sh -c "grep -q '^TracerPid:[[:space:]]*0$' /proc/$pid/status && ! grep -q BAD '$tmp/target.out'"

: >"$tmp/d.out"
"$b/src/padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
dpid=$!
pids="$pids $dpid"
wait_until 300 grep -q 'padroned: serving' "$tmp/d.out"
echo "4 $(complete nonm padrone -p "$pid" instrument prof_s)" >"$log"
"$padrone" -p "$pid" hot -n >>"$log" 2>&1
st=$?
check "padroned with no profile yet: no names from it, and hot -n sampled nothing (status $st)" \
	sh -c "grep -qx '4 ' '$log' && test $st = 2 && grep -q 'no profile yet' '$log'"
"$padrone" -p "$pid" profile 1 >"$tmp/profile.out" 2>&1
{
	echo "5 $(complete nonm padrone -p "$pid" instrument -m sample prof_s)"
	echo "6 $(complete nonm padrone -p "$pid" replace -t 100 prof_s)"
	echo "7 $(complete nonm padrone -p "$pid" replace prof_spin "$tmp/no")"
	echo "8 $(complete nonm padrone -p "$pid" instrument -m "")"
	echo "9 $(complete nonm padrone -p "$pid" instrument -a cache,e)"
} >"$log"
check "after a profile in padroned: its hot function, from padroned alone (instrument, replace)" \
	sh -c "grep -qx '5 prof_spin' '$log' && grep -qx '6 prof_spin' '$log'"
check "replace's second word is a file; instrument -m a mode, -a an analysis after a comma" \
	sh -c "grep -qx '7 $tmp/nonm' '$log' && grep -qx '8 exhaustive sample' '$log' &&
	       grep -qx '9 cache,edges' '$log'"
"$padrone" -p "$pid" detach >/dev/null 2>&1
wait_until 300 sh -c "! kill -0 $dpid 2>/dev/null"
check "padroned detached; the target runs on right" \
	sh -c "! kill -0 $dpid 2>/dev/null && kill -0 $pid && ! grep -q BAD '$tmp/target.out'"
check "hot -n without padroned and without a profile: status 2, no profile taken" \
	sh -c "'$padrone' -p $pid hot -n >'$log' 2>&1; test \$? = 2 && grep -q 'no profile yet' '$log' && ! grep -q '^#' '$log'"
