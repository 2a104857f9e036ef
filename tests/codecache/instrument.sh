#!/bin/sh
# instrument, report and uninstrument through padroned, as a user types them,
# on instr_kernel: two threads calling axpy(a, x, y, o, 1000) (per call one
# read of x[i] and one of y[i] and one write of o[i] per element, and the
# ret's read of the stack), checking its own results. After uninstrument
# the per-PC counts must be exactly the kernel's: with C the calls seen (the
# entry's Ir), Dr = 1000 C at each load, Dw = 1000 C at the store, Dr = C at
# the ret, Ir = 1000 C across the loop (give or take the partial calls of
# threads moved into and out of the copy mid-call); the original bytes are
# back; the target computes right all along and runs on; bad input gets
# status 2.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/../lib/kernel-counts.sh"
tap_setup cc-instr
echo 1..31
start_kernel 2 1000
entry=$(entry_of axpy)
axpy=$((entry - base))	# its offset in the file
orig=$(code $entry)
start_padroned

run un0 "$padrone" -p "$pid" uninstrument
check "uninstrument of nothing: status 2, says so" eval 'status un0 2 && says un0 "nothing is instrumented"'
run nof "$padrone" -p "$pid" instrument no_such_function
check "an unknown function: status 2, named" eval 'status nof 2 && says nof "no_such_function"'
run unr "$padrone" -p "$pid" instrument call_through
check "a function with an indirect jump of unknown targets: status 2, says so, untouched" \
	eval 'status unr 2 && says unr "indirect jump whose targets are unknown" && goes_on'
run ins "$padrone" -p "$pid" instrument axpy
check "instrument axpy exits 0" eval 'status ins 0 && says ins "^instrumented axpy"'
check "the entry is patched" test "$(code $entry)" != "$orig"
run again "$padrone" -p "$pid" instrument axpy
check "instrumenting it again: status 2, says it is instrumented" \
	eval 'status again 2 && says again "axpy is instrumented"'
check "the target computes right while instrumented" goes_on
run rep1 "$padrone" -p "$pid" report -j
check "report -j while instrumented names axpy and its events" \
	eval 'status rep1 0 && says rep1 "\"name\":\"axpy\"" && says rep1 "\"events\":\\[\"Ir\",\"I1mr\",\"ILmr\",\"Dr\",\"D1mr\",\"DLmr\",\"Dw\",\"D1mw\",\"DLmw\"\\]"'
# the first number FIELD has in NAME's JSON (the top level's come first),
# and the sum of its values
first() { grep -o "\"$2\":[0-9.]*" "$tmp/$1.out" | head -1 | cut -d: -f2; }
sum() { grep -o "\"$2\":[0-9]*" "$tmp/$1.out" | cut -d: -f2 | awk '{ s += $1 } END { print s + 0 }'; }
check "report -j while instrumented: the threads' units so far, not 0" \
	eval '[ "$(sum rep1 units)" -gt 0 ]'
run st1 "$padrone" -p "$pid" stats -j
wait_for '^alive' 2
run st2 "$padrone" -p "$pid" stats -j
run st "$padrone" -p "$pid" stats
live_stats() {
	status st1 0 && status st2 0 && status st 0 && says st "instrumented (exhaustive)" &&
	says st "pipeline's CPU" && says st2 '"sim_cpu_s":[0-9]' &&
	[ "$(first st2 units)" -gt "$(first st1 units)" ] &&
	[ "$(first st2 refs)" -gt "$(first st1 refs)" ] &&
	[ "$(sum st2 lost_units)" = 0 ] && [ "$(sum st2 gaps)" = 0 ] &&
	[ "$(grep -o '"active":true' "$tmp/st2.out" | wc -l)" -ge 2 ] &&
	grep -o '"units_per_s":[0-9.]*' "$tmp/st2.out" | cut -d: -f2 | awk '$1 > 0 { n++ } END { exit n < 2 }' &&
	grep -o '"ring_fill_pct":[0-9.-]*' "$tmp/st2.out" | cut -d: -f2 | awk '$1 < 0 || $1 > 100 { bad = 1 } END { exit bad }' &&
	awk -v c="$(first st2 cpu_s)" 'BEGIN { exit !(c > 0) }'
}
check "stats while instrumented: units and refs grow, 2+ consumers, nothing lost, fill 0-100%, CPU > 0" \
	live_stats
run un "$padrone" -p "$pid" uninstrument axpy
check "uninstrument axpy exits 0, original bytes back" \
	eval 'status un 0 && [ "$(code $entry)" = "$orig" ]'
run rep "$padrone" -p "$pid" report
# Threads inside axpy at the install or the uninstall go into or out of the
# copy mid-call: with T threads calling it, the loop's iterations are 1000
# per call give or take a partial call per thread at each end, and the
# ret's count is the calls' give or take one per thread
T=2
check "after uninstrument, Dr and Dw per PC are the kernel's exactly, 1000 a call" \
	kernel_counts_exact "$tmp/rep.out" axpy $((2 * T)) "$T"
# the loop: its header is the back jump's target; it holds the instructions
# from there to the back jump (each run 1000 C times), all the loads and
# the store; the function's events are the loop's and those of the
# instructions outside it, each of which runs C times before the loop and R
# times after it, give or take a call of each thread left between two of
# them at the uninstall (which leaves one waiting in the ring stub where a
# chunk ends, after its unit, at the next: with 8 calls to a chunk, that
# is the entry's unit every time) (C, L, R and dis: as kernel_counts_exact
# left them)
off() { printf '0x%x' $((base + 0x$1)); }
loop_exact() {
	at= hdr= inside=0 before=0 after=0
	addrs=$(echo "$dis" | awk '{ sub(":", "", $1); print $1, $2, $3 }')
	while read -r a op t; do	# the last backward jump
		case $op in j*) case $t in *[!0-9a-f]* | "") ;; *)
			[ $((0x$t)) -lt $((0x$a)) ] && at=$a hdr=$t ;; esac ;; esac
	done <<EOF
$addrs
EOF
	[ -n "$at" ] || return 1
	while read -r a op t; do
		if [ $((0x$a)) -lt $((0x$hdr)) ]; then
			before=$((before + 1))
		elif [ $((0x$a)) -le $((0x$at)) ]; then
			inside=$((inside + 1))
		else
			after=$((after + 1))
		fi
		[ "$op" = ret ] && break
	done <<EOF
$addrs
EOF
	lrow=$(awk -v h="$(off "$hdr")" '$10 == "loop" && $11 == h { print $1, $4, $7, $13 }' "$tmp/rep.out")
	frow=$(awk '$10 == "axpy" { print $1 }' "$tmp/rep.out")
	[ "$lrow" = "$((L * inside)) $((2 * L)) $L 1," ] || return 1
	le_out=0 le_n=0
	while read -r a op t; do
		if [ $((0x$a)) -lt $((0x$hdr)) ] || [ $((0x$a)) -gt $((0x$at)) ]; then
			le_ir=$(kc_row "$a" | awk '{ print $1 }')
			[ $((0x$a)) -lt $((0x$hdr)) ] && le_want=$C || le_want=$R
			[ -n "$le_ir" ] && kc_near "$le_ir" "$le_want" "$T" || return 1
			le_out=$((le_out + le_ir)) le_n=$((le_n + 1))
		fi
		[ "$op" = ret ] && break
	done <<EOF
$addrs
EOF
	[ "$le_n" = $((before + after)) ] && [ $((frow - ${lrow%% *})) = "$le_out" ]
}
check "report's loop: header the back jump's target, its events the loop body's exactly" \
	loop_exact
# the same in report -j, with the loop's entries and iterations and the
# edges (consecutive units of a thread): the loop iterates L times and is
# entered C times, and the back jump's two edges run L times together,
# give or take a partial call per thread moved into or out of the copy
run repj "$padrone" -p "$pid" report -j
edges_exact() {
	h=$(off "$hdr") a=$(off "$at")
	lp=$(grep -o "{\"header\":\"$h\"[^]]*" "$tmp/repj.out")
	ent=$(echo "$lp" | sed -n 's/.*"entries":\([0-9]*\).*/\1/p')
	it=$(echo "$lp" | sed -n 's/.*"iterations":\([0-9]*\).*/\1/p')
	jumps=$(grep -o "\"at\":\"$a\",\"to\":\"0x[0-9a-f]*\",\"kind\":\"[a-z_]*\",\"count\":[0-9]*" "$tmp/repj.out")
	out=$(echo "$jumps" | sed 's/.*"count"://' | awk '{ s += $1 } END { print s + 0 }')
	echo "# loop $h: entered $ent, $it iterations; C=$C, L=$L; the back jump's edges ran $out times:"
	echo "$jumps" | sed 's/^/#   /'
	[ -n "$ent" ] && [ -n "$it" ] && [ "$(echo "$jumps" | grep -c '"kind":"taken"')" = 1 ] &&
	[ "$(echo "$jumps" | grep -c '"kind":"not_taken"')" = 1 ] &&
	[ "$it" -le "$L" ] && [ "$it" -ge $((L - T)) ] && [ "$ent" -ge $((C - T)) ] &&
	[ "$ent" -le $((C + T)) ] && [ "$out" -le "$L" ] && [ "$out" -ge $((L - T)) ]
}
check "report -j: the loop entered once a call, 1000 iterations each; the back jump's edges as many" \
	eval 'status repj 0 && edges_exact'
# report -o: Cachegrind's format, each instruction's "line" its address in
# the file (decimal); cg_annotate's total for ???:axpy is report's
run cgo "$padrone" -p "$pid" report -o "$tmp/cg.out"
axpyrow() { awk '$10 == "axpy" { print $1, $4, $7 }' "$tmp/rep.out"; }
cg_lines() {
	[ "$(grep -c '^fn=axpy$' "$tmp/cg.out")" = 1 ] && grep -q '^fl=???$' "$tmp/cg.out" &&
	grep -q '^events: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw$' "$tmp/cg.out" &&
	[ "$(awk -v l=$((axpy)) '$1 == l { print $2 }' "$tmp/cg.out")" = "$C" ] &&
	! ls "$tmp"/cg.out.tmp* >/dev/null 2>&1
}
check "report -o writes cachegrind.out: ???:axpy, the entry's line is its address, Ir = calls" \
	eval 'status cgo 0 && cg_lines'
cg_totals() {
	cg_annotate "$tmp/cg.out" >"$tmp/cga.out" 2>"$tmp/cga.err" && ! [ -s "$tmp/cga.err" ] &&
	# its rows: counts with commas, each followed by "(PERCENT%)", then file:function
	[ "$(sed 's/([^)]*)//g' "$tmp/cga.out" | tr -d , | awk '$10 == "???:axpy" { print $1, $4, $7 }')" = \
	  "$(axpyrow)" ] && [ "$(axpyrow | cut -d' ' -f2,3)" = "$((2 * L + R)) $L" ]
}
if command -v cg_annotate >/dev/null; then
	check "cg_annotate reads it; its Ir, Dr, Dw for axpy are report's, the kernel's exactly" \
		cg_totals
else
	skip "cg_annotate reads it" "no cg_annotate (valgrind) installed"
fi
run cgj "$padrone" -p "$pid" report -j -o "$tmp/cg2.out"
check "report -j -o: status 2, no file left" eval 'status cgj 2 && ! [ -e "$tmp/cg2.out" ] &&
	! ls "$tmp"/cg2.out.tmp* >/dev/null 2>&1'
run cgd "$padrone" -p "$pid" report -o "$tmp/no/such/dir/cg.out"
check "report -o into a missing directory: fails, names it" \
	eval '! status cgd 0 && says cgd "no/such/dir"'
run st3 "$padrone" -p "$pid" stats -j
run repj "$padrone" -p "$pid" report -j
check "stats after uninstrument: consumers ended, their units and refs are report's" \
	eval 'status st3 0 && ! says st3 "\"active\":true" && [ "$(first st3 units)" -gt 0 ] &&
	[ "$(first st3 units)" = "$(sum repj units)" ] && [ "$(first st3 refs)" = "$(sum repj refs)" ]'
check "the target runs on, right, after uninstrument" goes_on
# Instrumenting again and again in one padroned (a service's): the same
# function's results add up in its one entry, past the 16 functions an
# attachment holds, and padroned keeps no ring of the times before.
fds() { ls "/proc/$dpid/fd" | wc -l; }
irs() { grep -o '"name":"axpy","entry":"[^"]*","active":[a-z]*,"events":{"Ir":[0-9]*' "$tmp/$1.out" |
	sed 's/.*"Ir"://'; }
fd0=$(fds)
set --
for i in $(seq 20); do set -- "$@" instrument axpy \; uninstrument axpy \; ; done
run re "$padrone" -p "$pid" "$@" report -j
check "instrument and uninstrument axpy 20 times more: each accepted (status $(cat "$tmp/re.st" 2>/dev/null))" \
	eval 'status re 0 && [ "$(grep -c "^instrumented axpy" "$tmp/re.out")" = 20 ]'
check "padroned's fds are as before ($fd0, now $(fds))" test "$(fds)" -le "$fd0"
# padroned keeps a thread's counts of the times before in one row (stats
# lists the rows): its state does not grow with the times a function is
# instrumented. Rows: one per thread (and spare ring) of the times before,
# and those of the last time until its rings are given back, so at most
# twice the first time's
rows() { grep -o '"tid":' "$tmp/$1.out" | wc -l; }
run st4 "$padrone" -p "$pid" stats -j
check "stats after 21 times: a row per thread, not per thread per time ($(rows st3) rows after the first, now $(rows st4))" \
	eval 'status st4 0 && [ "$(rows st3)" -gt 0 ] && [ "$(rows st4)" -le $((2 * $(rows st3))) ]'
check "report lists axpy once, its Ir grown past the first time's ($(irs repj) -> $(irs re))" \
	eval '[ "$(irs re | wc -l)" = 1 ] && [ "$(irs re)" -gt "$(irs repj)" ] && [ "$(code $entry)" = "$orig" ]'
run det "$padrone" -p "$pid" detach
check "detached, the target runs on, right" eval 'status det 0 && goes_on'
# cachegrind's --I1/--D1/--LL: the first function fixes the geometry of the
# attachment's results; LEVEL's geometry in NAME's JSON
geo_of() { grep -o "\"$2\":\"[0-9,]*\"" "$tmp/$1.out" | head -1; }
run geo "$padrone" -p "$pid" instrument --D1 1024,2,64 axpy \; report -j
check "instrument --D1 S,A,L: report's geometry is it, the others the host's" \
	eval 'status geo 0 && says geo "\"D1\":\"1024,2,64\"" &&
	[ "$(geo_of geo I1)$(geo_of geo LL)" = "$(geo_of rep1 I1)$(geo_of rep1 LL)" ]'
run geo2 "$padrone" -p "$pid" instrument -D 1024,2,64 axpy \; uninstrument \; instrument --D1=2048,2,64 axpy
check "another geometry after results: status 2, names the one in use" \
	eval 'status geo2 2 && says geo2 "results so far are for I1 [0-9,]*, D1 1024,2,64"'
run geo3 "$padrone" -p "$pid" instrument --D1 1000,3,64 axpy
check "a geometry cachegrind would refuse: status 2, says why, nothing instrumented" \
	eval 'status geo3 2 && says geo3 "D1: size 1000" && [ "$(code $entry)" = "$orig" ] && goes_on'
# -a blocks and refs simulate nothing: report gives Ir (blocks), or Ir, Dr
# and Dw (refs), counted from the blocks' executions, and they are the
# kernel's: with C the entry's, each instruction of the loop's body
# (hdr..at, as loop_exact found them) runs 1000 C times, give or take a
# partial call per thread, and under refs the loop's row (its PCs' sums)
# has two reads (x[i], y[i]) and a write (o[i]) per iteration, exactly. An
# attachment's results come from one analysis: detached in between.
ir_at() { awk -v pc="$(printf '0x%x' "$2")" '$NF == pc { print $1 }' "$tmp/$1.out"; }
ir_exact() {
	status "$1" 0 && says "$1" "^# $2 analysis: $3" && says "$1" "^ *$4 where\$" &&
	[ -n "$hdr" ] && [ -n "$at" ] || return 1
	c=$(ir_at "$1" "$entry") lb=$(ir_at "$1" $((base + 0x$hdr))) le=$(ir_at "$1" $((base + 0x$at)))
	[ -n "$c" ] && [ "$c" -gt 0 ] && [ -n "$lb" ] && [ "$lb" = "$le" ] &&
	kc_near "$lb" $((1000 * c)) $((T * 1000)) && [ "$(code $entry)" = "$orig" ]
}
# the loop's row under refs: "Ir Dr Dw loop 0xHDR ..."
loop_data() {
	ir_exact "$1" refs "Ir, Dr and Dw" "Ir  *Dr  *Dw" || return 1
	awk -v h="$(printf '0x%x' $((base + 0x$hdr)))" -v lb="$lb" '
		$4 == "loop" && $5 == h { seen = 1; print "# loop " h ": Dr " $2 ", Dw " $3 ", iterations " lb
					   if ($2 != 2 * lb || $3 != lb) bad = 1 }
		END { exit !seen || bad }' "$tmp/$1.out"
}
run detblocks "$padrone" -p "$pid" detach
run irblocks "$padrone" -p "$pid" instrument -a edges --for 1 axpy
check "instrument -a edges --for 1: blocks, Ir alone, 1000 a call across the loop, the edges listed, original back" \
	eval 'ir_exact irblocks blocks "Ir alone" Ir && says irblocks "^# edges of axpy" &&
	      says irblocks "^ *[1-9][0-9]*   $(off "$at") -> $(off "$hdr") taken\$"'
run detrefs "$padrone" -p "$pid" detach
run irrefs "$padrone" -p "$pid" instrument -a refs --for 1 axpy
check "instrument -a refs --for 1: Ir, Dr, Dw; 1000 a call across the loop, two reads and a write each; original back" \
	loop_data irrefs
run detr "$padrone" -p "$pid" detach
run irr "$padrone" -p "$pid" instrument -a record --for 1 -o "$tmp/cg3.out" axpy
check "instrument -a record --for 1 -o FILE: status 2, it measures no events, no file, target right" \
	eval 'status irr 2 && says irr "record analysis measures no events" && ! [ -e "$tmp/cg3.out" ] &&
	[ "$(code $entry)" = "$orig" ] && goes_on'
