#!/bin/sh
# The process exiting or exec'ing in the middle of replace, restore and
# instrument: the command says so with status 9 (exit) or 10 (exec) and
# those words, padroned ends with the same status, nothing hangs, and the
# program runs on: its ticks right, untraced, its own clean end.
# - replace and instrument: one padrone command line does replace/restore
#   (or instrument/uninstrument) of libc's clock_nanosleep over and over,
#   through padroned or one-shot, while hotloop -d 1 (exits) or execer
#   (execs hotloop after 1 s) sleeps between ticks. Which command the end
#   came in is read from what the line printed (replaced vs restored,
#   instrumented vs uninstrumented); trials go on (at most 8) until it was
#   the one under test.
# - restore: tests/targets/leaver exits or execs the moment its
#   clock_nanosleep has its first bytes back, while the restore waits for
#   leaver's sleeper thread to leave the replacement (300 ms sleeps).
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
hotloop=$(cd "$b/tests/targets" && pwd)/hotloop
obj=$b/tests/codecache/repl/nanosleep_raw.o
. "$(dirname "$0")/tap.sh"
tap_setup cc-leaving
echo 1..10

# start ENDING: the target, sleeping 2 ms after each tick of 20000
# iterations; exit: hotloop ends after 3 s; exec: execer runs 3 s, then
# becomes hotloop (for 4 s: the words "(now hotloop)" read its name, which
# a loaded machine read once after hotloop had ended at 2 s). At load 35
# padroned took over a second to start: a target of 1 s had ended first.
start() {
	: >"$tmp/out"
	if [ "$1" = exit ]; then
		"$hotloop" -d 3 -s 2000 -w 20000 >"$tmp/out" 2>&1 &
	else
		"$b/tests/targets/execer" -d 3000 "$hotloop" -d 4 -s 2000 -w 20000 >"$tmp/out" 2>&1 &
	fi
	pid=$!
	wait_for '^tick' 1 0
}
# reap PID: its exit status, once it ends (30 s at most: then killed, 124)
reap() {
	timeout 30 sh -c "while kill -0 $1 2>/dev/null && ! grep -q '^State:.*Z' /proc/$1/status 2>/dev/null; do sleep 0.1; done"
	kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' /proc/"$1"/status && kill -9 "$1"
	wait "$1"
}
# the commands, 3000 pairs: more than run before the end comes (at 3 s; a
# fast machine did 300 pairs in less, and the line ended first, status 0)
pairs() {
	i=0
	while [ $i -lt 3000 ]; do
		if [ "$1" = replace ]; then
			printf '%s\n' replace clock_nanosleep "$obj" ';' restore clock_nanosleep ';'
		else
			printf '%s\n' instrument clock_nanosleep ';' uninstrument clock_nanosleep ';'
		fi
		i=$((i + 1))
	done
}
# what the target printed last, checked: hotloop's last tick is the one
# `hotloop -e N -w 20000` computes, it said "done ticks", exited 0
ran_right() {
	reap "$pid"
	st=$?
	pid=
	last=$(grep '^tick .* checksum' "$tmp/out" | tail -1)
	t=$(echo "$last" | cut -d' ' -f2)
	[ $st = 0 ] && grep -q '^done ticks' "$tmp/out" && ! grep -q '^error' "$tmp/out" &&
		[ "$last" = "$("$hotloop" -e "$t" -w 20000)" ]
}
# start_padroned VIA: a padroned for $pid if VIA is padroned
start_padroned() {
	[ "$1" = padroned ] || return 0
	: >"$tmp/d.out"	# not the last one's "serving"
	"$padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
	dpid=$!
	i=0
	while ! grep -q "padroned: serving" "$tmp/d.out" && [ $i -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
}
# judge WHAT ENDING VIA STATUS: the command's status and words, padroned's
# end, no tracer left; what is wrong goes to $tmp/wrong
judge() {
	code=9 words="process $pid has exited"
	[ "$2" = exec ] && code=10 words="process $pid has exec'd another program (now hotloop)"
	# through padroned, its words; or padrone's, when the end came between
	# two commands and padroned was gone with the process
	said=$(cat "$tmp/c.err")
	[ "$3" = padroned ] && [ "$said" = "padroned: $words" ] && said="padrone: $words"
	[ "$4" = $code ] && [ "$said" = "padrone: $words" ] ||
		echo "$1 $2 via $3: status $4 (not $code): $(cat "$tmp/c.err")" >>"$tmp/wrong"
	if [ -n "$dpid" ]; then
		reap "$dpid"
		dst=$?
		dpid=
		[ $dst = $code ] || echo "$1 $2 via $3: padroned ended with $dst (not $code): $(tail -3 "$tmp/d.out" | tr '\n' ' ')" >>"$tmp/wrong"
	fi
	tracer=$(sed -n 's/^TracerPid:[[:space:]]*//p' /proc/"$pid"/status 2>/dev/null)
	[ "${tracer:-0}" = 0 ] || echo "$1 $2 via $3: still traced by $tracer" >>"$tmp/wrong"
}
# too_late ENDING VIA before|after: the target's end came before padroned (or the
# one-shot padrone) had attached, as a loaded machine can make it: no
# trial of what happens in the middle of a command (padroned ends with
# "no such process" or serves the program exec'd; padrone says no such
# process). Cleans up after it.
too_late() {
	if [ "$3" = before ]; then	# padroned started, the command line not yet
		grep -q 'padroned: serving' "$tmp/d.out" &&
			{ [ "$1" = exit ] || [ "$(readlink /proc/$pid/exe)" != "$hotloop" ]; } && return 1
	else	# after the command line: it found no process (nor padroned)
		grep -q 'no such process' "$tmp/c.err" || return 1
	fi
	[ -n "$dpid" ] && kill -9 "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	dpid=
	reap "$pid"
	pid=
	return 0
}
# trial KIND ENDING VIA: one target, one command line; sets hit (the
# command the end came in, or "late" when the end came first) and appends
# what went wrong to $tmp/wrong
trial() {
	start "$2"
	start_padroned "$3"
	hit=late
	[ "$3" = padroned ] && too_late "$2" "$3" before && return
	# shellcheck disable=SC2046 # one word a line, no blanks in them
	IFS='
'
	timeout 120 "$padrone" -p "$pid" $(pairs "$1") >"$tmp/c.out" 2>"$tmp/c.err"
	st=$?
	unset IFS
	too_late "$2" "$3" after && return
	judge "$1" "$2" "$3" $st
	ran_right || echo "$1 $2 via $3: the program did not run on right: $(tail -2 "$tmp/out")" >>"$tmp/wrong"
	if [ "$1" = replace ]; then
		done=$(grep -c '^replaced clock_nanosleep' "$tmp/c.out") undone=$(grep -c '^restored clock_nanosleep' "$tmp/c.out")
		[ "$done" -gt "$undone" ] && hit=restore || hit=replace
	else
		done=$(grep -c '^instrumented clock_nanosleep' "$tmp/c.out") undone=$(grep -c '^uninstrumented clock_nanosleep' "$tmp/c.out")
		[ "$done" -gt "$undone" ] && hit=uninstrument || hit=instrument
	fi
}

# restore_trial ENDING VIA: leaver's clock_nanosleep replaced (one-shot:
# the replacement stays), its sleeper back in it, then restore
restore_trial() {
	: >"$tmp/out"
	if [ "$1" = exit ]; then
		"$b/tests/targets/leaver" >"$tmp/out" 2>&1 &
	else
		"$b/tests/targets/leaver" "$hotloop" -d 1 -s 2000 -w 20000 >"$tmp/out" 2>&1 &
	fi
	pid=$!
	wait_for '^ready' 1 0
	start_padroned "$2"
	run rep "$padrone" -p "$pid" replace clock_nanosleep "$obj"
	wait_for '^replaced' 1 0 && wait_for '^tick'	# asleep in the replacement
	timeout 120 "$padrone" -p "$pid" restore clock_nanosleep >"$tmp/c.out" 2>"$tmp/c.err"
	judge restore "$1" "$2" $?
	if [ "$1" = exit ]; then
		reap "$pid"
		st=$?
		pid=
		[ $st = 0 ] && grep -q '^leaving' "$tmp/out" ||
			echo "restore exit via $2: leaver ended with $st" >>"$tmp/wrong"
	else
		ran_right || echo "restore exec via $2: hotloop did not run on right: $(tail -2 "$tmp/out")" >>"$tmp/wrong"
	fi
}

for ending in exit exec; do
	: >"$tmp/wrong"
	hits=" " k=0
	while [ $k -lt 8 ] && ! echo "$hits" | grep -q ' replace '; do
		[ $((k % 2)) = 0 ] && via=padroned || via=padrone
		trial replace $ending $via
		hits="$hits$hit "
		k=$((k + 1))
	done
	check "replace/restore, the process ${ending}ing: status, words, padroned's end, the program right ($k trials)" \
		test ! -s "$tmp/wrong"
	[ -s "$tmp/wrong" ] && sed 's/^/# /' "$tmp/wrong"
	check "... the $ending came during a replace (${hits# })" eval 'echo "$hits" | grep -q " replace "'
	: >"$tmp/wrong"
	restore_trial $ending padroned
	restore_trial $ending padrone
	check "the process ${ending}ing during a restore (leaver), through padroned and one-shot: the same" \
		test ! -s "$tmp/wrong"
	[ -s "$tmp/wrong" ] && sed 's/^/# /' "$tmp/wrong"
	: >"$tmp/wrong"
	hits=" " k=0
	while [ $k -lt 8 ] && ! echo "$hits" | grep -q ' instrument '; do
		[ $((k % 2)) = 0 ] && via=padroned || via=padrone
		trial instrument $ending $via
		hits="$hits$hit "
		k=$((k + 1))
	done
	check "instrument/uninstrument, the process ${ending}ing: status, words, padroned's end, the program right ($k trials)" \
		test ! -s "$tmp/wrong"
	[ -s "$tmp/wrong" ] && sed 's/^/# /' "$tmp/wrong"
	check "... the $ending came during an instrument (${hits# })" eval 'echo "$hits" | grep -q " instrument "'
done
