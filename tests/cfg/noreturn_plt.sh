#!/bin/sh
# A noreturn function of a user's shared library, called through the PLT
# at the end of a function that has no FDE (cfg_noreturn's checked_double
# calls libcfg_noreturn.so's lib_die): the call does not return, and the
# CFG ends there instead of running into after_checked -- whether the
# GOT slot is still unbound (lazy binding: the name is looked up in the
# library) or bound (LD_BIND_NOW: the slot is followed).
b=${top_builddir:-.}
padrone=$b/src/padrone
. "$(dirname "$0")/../codecache/tap.sh"
tap_setup cfg-noreturn

echo "1..4"
for bind in lazy now; do
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	if [ $bind = now ]; then
		LD_BIND_NOW=1 "$b/tests/targets/cfg_noreturn" >"$tmp/out" 2>&1 &
	else
		"$b/tests/targets/cfg_noreturn" >"$tmp/out" 2>&1 &
	fi
	pid=$!
	wait_for ready 1 0
	wait_for "round .* ok"
	run cfg "$padrone" -p "$pid" cfg checked_double
	after=$("$padrone" -p "$pid" disas after_checked | sed -n '1s/^function after_checked at \(0x[0-9a-f]*\):.*/\1/p')
	check "$bind binding: the call to lib_die@plt does not return" \
		eval 'status cfg 0 && says cfg "^call at 0x[0-9a-f]* -> 0x[0-9a-f]* lib_die@plt (does not return)$"'
	check "$bind binding: the CFG ends at the call, before after_checked ($after)" \
		eval '[ -n "$after" ] && ! says cfg "$after" && says cfg "^function checked_double at 0x[0-9a-f]*: 3 blocks" && fine'
done
