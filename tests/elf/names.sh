#!/bin/sh
# One resolver for names: every command resolves a function's name the
# same way. elf_names keeps two `static int counter`s: a replacement that
# says `extern int counter` is refused, listing both, not bound to one;
# scale is a static of the program and a global of its library: cfg,
# disas, replace and measure all refuse it listing both, and all accept
# MODULE:NAME; libc's aliases (__strndup) and MODULE:NAME of libc resolve;
# a name of the perf map (JIT code), which profile shows, is accepted;
# code no symbol or FDE names is named alike by bt, info threads and cfg;
# padroned's session reads the modules again when a library comes.
b=${top_builddir:-.}
padrone=$b/src/padrone
padroned=$b/src/padroned
. "$(dirname "$0")/../codecache/tap.sh"
tap_setup elf-names

echo "1..14"
"$b/tests/targets/elf_names" >"$tmp/out" 2>&1 &
pid=$!
wait_for ready 1 0
wait_for "round .* ok"

cands='scale. is ambiguous: 2 definitions (elf_names:scale at 0x[0-9a-f]* (static), libelf_names.so:scale at 0x[0-9a-f]*); give MODULE:NAME or the address'
run repl "$padrone" -p "$pid" replace bump_a "$b/tests/elf/repl/counter_user.o"
check "extern counter of a replacement is refused, both statics listed" \
	eval 'status repl 2 && says repl "needs counter, which the target defines more than once: .counter. is ambiguous: 2 definitions (elf_names:counter at 0x[0-9a-f]* (static), elf_names:counter at 0x[0-9a-f]* (static))$"'
for cmd in "cfg scale" "disas scale" "replace scale $b/tests/elf/repl/counter_user.o:bump_a" \
	"measure scale 10"; do
	run amb "$padrone" -p "$pid" $cmd
	check "$(echo "$cmd" | cut -d' ' -f1) refuses a name with two definitions, listing them" \
		eval 'status amb 2 && says amb "$cands"'
done
run exe "$padrone" -p "$pid" disas elf_names:scale
run lib "$padrone" -p "$pid" disas libelf_names.so:scale
check "MODULE:NAME picks the program's static or the library's global" \
	eval 'status exe 0 && status lib 0 && says exe "^function scale at" && says lib "^function scale at" &&
	      [ "$(head -1 "$tmp/exe.out")" != "$(head -1 "$tmp/lib.out")" ]'
run alias "$padrone" -p "$pid" cfg __strndup
run alias2 "$padrone" -p "$pid" disas libc.so.6:__strndup
check "libc's aliases resolve, plain and as MODULE:NAME" \
	eval 'status alias 0 && status alias2 0'
run none "$padrone" -p "$pid" disas nosuch.so:scale
check "an unknown module is no function" \
	eval 'status none 2 && says none "no function named .nosuch.so:scale."'
wait_for "round .* ok" 2
check "the target computes right" fine

# JIT code: prof_jit names its function in /tmp/perf-PID.map
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"$b/tests/targets/prof_jit" >"$tmp/out" 2>&1 &
pid=$!
wait_for "^ready jit" 1 0
start=$(sed -n 's/^ready jit \([0-9a-f]*\) .*/\1/p' "$tmp/out")
run jit "$padrone" -p "$pid" disas jit_spin_loop
check "a name of the perf map is accepted where profile shows it" \
	eval 'status jit 0 && says jit "^function jit_spin_loop at 0x$start:"'
rm -f "/tmp/perf-$pid.map"

# Code without symbols or FDEs: bt says MODULE+0xOFF, info threads too
# (it said ??), and cfg names the function sub_ADDR (it said ?)
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"$b/tests/targets/prof_nofde_stripped" >"$tmp/out" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q prof_nofde "/proc/$pid/maps" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
run threads "$padrone" -p "$pid" info threads
run bt "$padrone" -p "$pid" bt
check "info threads names the function as bt does, not ??" \
	eval 'status threads 0 && says threads " prof_nofde_stripped+0x[0-9a-f]*$" &&
	      says bt "^#0 .* in prof_nofde_stripped+0x[0-9a-f]* (" && ! says threads "??"'
pc=$(sed -n '1s/^#0 *\(0x[0-9a-f]*\) .*/\1/p' "$tmp/bt.out")
run cfg "$padrone" -p "$pid" cfg "$pc"
check "cfg names a function no symbol names sub_ADDR, not ?" \
	eval 'status cfg 0 && says cfg "^function sub_[0-9a-f]* at 0x[0-9a-f]*: "'

# padroned's session keeps the modules it read, and reads them again when
# the process maps a library (elf_late dlopens libcfg_noreturn.so on USR1)
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
"$b/tests/targets/elf_late" "$b/tests/targets/libcfg_noreturn.so" >"$tmp/out" 2>&1 &
pid=$!
wait_for ready 1 0
chmod 700 "$PADRONE_RUNDIR"	# padroned's run directory must be private
"$padroned" --pid "$pid" >"$tmp/d.out" 2>&1 &
dpid=$!
i=0
until grep -q serving "$tmp/d.out" 2>/dev/null || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
# (a dry-run replace: unlike cfg, it has no fallback of its own; found,
# lib_die gets as far as linking the replacement, which needs counter)
repl="$b/tests/elf/repl/counter_user.o:bump_a"
run early "$padrone" -p "$pid" replace -n lib_die "$repl"
kill -USR1 "$pid"
wait_for loaded 1 0
run late "$padrone" -p "$pid" replace -n lib_die "$repl"
check "through padroned, a name is unknown before its library is loaded" \
	eval 'grep -q "serving process $pid " "$tmp/d.out" && status early 2 &&
	      says early "has no function named lib_die"'
check "... and found once it is" \
	eval 'status late 2 && ! says late "no function named" && says late "needs counter, which"'
"$padrone" -p "$pid" detach >/dev/null 2>&1
i=0
while kill -0 "$dpid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 "$dpid" 2>/dev/null
wait "$dpid" 2>/dev/null
