#!/bin/sh
# Where profiles go: profile -o/-F writes pprof, folded stacks and JSON, and
# -u leaves the kernel out. The pprof file is read by an independent
# decoder, Google's pprof tool built from Debian's golang-github-google-pprof-dev
# (offline, with Debian's go): it must list the same functions with the same
# sample counts as padrone's own report of the same profile, and name the
# program's mapping with its GNU build-id as readelf reads it.
b=$(cd "${top_builddir:-.}" && pwd)
padrone=$b/src/padrone
padroned=$b/src/padroned
. "${top_srcdir:-.}/tests/lib/tap.sh"
tap_init export
PADRONE_RUNDIR=$tmp/run
export PADRONE_RUNDIR
mkdir -m 700 "$PADRONE_RUNDIR"

# pprof: built once per build tree from Debian's sources, without network.
pprof=$b/tests/src/pprof
if [ ! -x "$pprof" ]; then
	if ! command -v go >/dev/null || [ ! -d /usr/share/gocode/src/github.com/google/pprof ]; then
		echo "1..0 # SKIP no pprof to read with: apt-get install golang-go golang-github-google-pprof-dev"
		exit 0
	fi
	GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= GOCACHE=$b/tests/src/.gocache \
		go build -o "$pprof.tmp" github.com/google/pprof >"$tmp/go.log" 2>&1 &&
		mv "$pprof.tmp" "$pprof" || { echo "Bail out! cannot build pprof:"; sed 's/^/# /' "$tmp/go.log"; exit 1; }
fi

tap_context() { [ -n "${name:-}" ] && cat "$tmp/$name.out" "$tmp/$name.err" 2>/dev/null; }
run() {	# run NAME COMMAND...: output in $tmp/NAME.out/.err, status in $st
	name=$1
	shift
	"$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	st=$?
}
echo "1..14"

"$b/tests/targets/prof_hot" >"$tmp/target.out" &
pid=$!
pids="$pid"
i=0
until grep -q ready "$tmp/target.out" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done

# One attach: the profile written as pprof, then the same report as text.
cd "$tmp" || exit 1
run one "$padrone" -p "$pid" profile -o prof.pb.gz 2 \; hot 8
check "profile -o FILE writes a pprof file and hot shows the same profile" \
	test "$st" = 0 -a -s prof.pb.gz -a "$(grep -c 'prof_spin' one.out)" -ge 1
# ours: "name samples" of the hot table; theirs: pprof's flat samples
awk '!/^#/ && NF >= 6 { print $4, $2 }' one.out >ours
"$pprof" -top -symbolize=none -sample_index=samples -nodefraction=0 -nodecount=100000 \
	prof.pb.gz >pprof.top 2>pprof.err
awk '$NF != "" && $1 ~ /^[0-9]+$/ { print $6, $1 }' pprof.top >theirs
name=pprof
check "pprof reads the file: its hottest function is prof_spin" \
	test "$(awk 'NR == 1 { print $1 }' theirs)" = prof_spin
same=yes
[ -s ours ] || same="no: no hot table"
while read -r f c; do
	grep -qx "$f $c" theirs || { same="no: $f $c"; echo "# $same"; }
done <ours
check "pprof counts each of the report's hottest functions as padrone does" test "$same" = yes
total=$(sed -n 's/^# pid [0-9]*: \([0-9]*\) samples.*/\1/p' one.out)
check "pprof's total is the report's samples ($total)" \
	grep -q "Total samples = $total\b" pprof.top
"$pprof" -raw prof.pb.gz >pprof.raw 2>&1
bid=$(readelf -n "$b/tests/targets/prof_hot" | sed -n 's/.*Build ID: //p')
main_map=$(sed -n '/^Mappings/{n;p;}' pprof.raw)
name=pprof
check "the first mapping is the program, with its GNU build-id ($bid)" \
	sh -c "echo '$main_map' | grep -q 'prof_hot $bid'"
check "pprof's period is 1/999 s in cpu nanoseconds" grep -q "^Period: 1001001$" pprof.raw

# Folded stacks and JSON of one profile, against its report.
run fold "$padrone" -p "$pid" profile -o prof.folded 2 \; hot -j 1000
fsum=$(awk '{ s += $NF } END { print s }' prof.folded)
jsamples=$(sed -n 's/.*"samples":\([0-9]*\),.*/\1/p' fold.out)
check "folded stacks (.folded) count every sample of the report ($jsamples)" \
	test "$st" = 0 -a "$fsum" = "$jsamples"
leaf=$(awk '{ n = split($1, f, ";"); if (f[n] == "prof_spin") s += $NF } END { print s }' prof.folded)
jself=$(grep -o '"name":"prof_spin"[^}]*' fold.out | sed -n 's/.*"self":\([0-9]*\).*/\1/p')
check "stacks ending in prof_spin add up to its self samples ($jself)" \
	test "${leaf:-0}" -gt 0 -a "$leaf" = "$jself"
check "folded lines are distinct stacks, root first" \
	test "$(awk '{ $NF = ""; print }' prof.folded | sort | uniq -d | wc -l)" = 0

# -F json to standard output is the report, the whole of it
run js "$padrone" -p "$pid" profile -F json 1
check "-F json prints the whole report" grep -q '"functions":\[{"name":"prof_spin"' js.out

# A command that fails leaves no file, nor a temporary one.
run bad "$padrone" -p "$pid" profile -o bad.pb.gz 1 20000
check "a refused profile writes no file (status $st)" \
	test "$st" != 0 -a -z "$(ls | grep 'bad\.pb')"

# Through padroned: the file is the client's, in the client's directory.
"$padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
dpid=$!
pids="$pids $dpid"
i=0
until grep -q serving "$tmp/d.out" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
mkdir sub && cd sub || exit 1
run ../remote "$padrone" -p "$pid" profile -o remote.pb.gz 1
name=remote
check "through padroned, -o writes the file where padrone runs" \
	sh -c "grep -q 'serving process $pid ' '$tmp/d.out' && test $st = 0 &&
		'$pprof' -top -symbolize=none remote.pb.gz 2>&1 | grep -q prof_spin"
cd .. || exit 1
"$padrone" -p "$pid" detach >/dev/null 2>&1
wait "$dpid" 2>/dev/null

# Kernel or not: dd copying /dev/zero spends its time in the kernel.
dd if=/dev/zero of=/dev/null bs=64k 2>/dev/null &
dd=$!
pids="$pids $dd"
# until the forked shell has become dd (a profile that began before would
# see the exec: status 10)
wait_until 100 sh -c "readlink /proc/$dd/exe | grep -q '/dd$'"
run kern "$padrone" -p "$dd" profile -j 1
ks=$(sed -n 's/.*"kernel_samples":\([0-9]*\),.*/\1/p' kern.out)
s=$(sed -n 's/.*"samples":\([0-9]*\),.*/\1/p' kern.out)
check "without -u, the kernel's samples are counted ($ks of $s)" \
	test "$st" = 0 -a "${ks:-0}" -gt 0 -a "$((2 * ${ks:-0}))" -gt "${s:-0}"
run user "$padrone" -p "$dd" profile -u -j 1 \; profile -u 1
sys=$(sed -n 's/.*"cpu_system_s":\([0-9.]*\).*/\1/p' user.out)
usr=$(sed -n 's/.*"cpu_user_s":\([0-9.]*\).*/\1/p' user.out)
check "-u samples user code only, and still tells the kernel's CPU time (${sys}s of $usr+$sys)" \
	sh -c "grep -q '\"user_only\":true,\"kernel_samples\":0,' user.out &&
		! grep -q '\[kernel' user.out && awk 'BEGIN { exit !($sys > $usr) }' &&
		grep -q '^# kernel: not sampled (user code only); CPU time .*in the kernel)' user.out"
exit 0
