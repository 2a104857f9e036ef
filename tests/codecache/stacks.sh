#!/bin/sh
# Stack walks that end before the outermost frame must not be trusted.
# cc_leaf's thread sleeps in leaf(), called from mid(); mid is replaced, and
# while leaf is to return into the replacement, `restore mid ; replace mid
# mid_other.o` frees the replacement and loads another mid where it was.
# padrone must see the return address (by walking the stack, or by scanning
# what it could not walk) and wait for the thread to leave first: the
# target's own check ("round N ok") and its survival say whether it did.
# Three ways the walk used to stop at leaf and be taken for complete, or
# stop there now: the executable deleted after start (a package upgrade),
# a gcc -static build (no .eh_frame_hdr), and no unwind tables at all.
# bt says where and why a walk ended, and names code-cache frames.
# A walk never reads below a stack: cc_gap's frame pointer (and, with
# "cfi", its unwind information) points 1 MiB below it, or 332 GiB with
# padrone's stack unlimited, where /proc/PID/mem grew the stack (or logged
# __vm_enough_memory for 332 GiB).
b=${top_builddir:-.}
padrone=$b/src/padrone
repl=$b/tests/codecache/repl
. "$(dirname "$0")/tap.sh"
tap_setup cc-stacks

echo "1..33"
# variant LABEL PROGRAM [deleted]
variant() {
	label=$1
	cp "$2" "$tmp/cc_leaf"
	"$tmp/cc_leaf" 300 >"$tmp/out" 2>&1 &
	pid=$!
	wait_for ready 1 0
	[ "${3:-}" = deleted ] && rm "$tmp/cc_leaf"
	wait_for "round .* ok"
	run bt0 "$padrone" -p "$pid" bt
	check "$label: bt before any change walks to _start, or says where it stopped" \
		eval 'status bt0 0 && { says bt0 " in _start+0x" && ! says bt0 "the walk stopped"; } ||
		      { [ "$label" = "no unwind tables" ] && says bt0 "^the walk stopped at #[0-9]*: no FDE of .*cc_leaf.* covers 0x"; }'
	run rep1 "$padrone" -p "$pid" replace -t 10000 mid "$repl/mid_new.o"
	check "$label: replace mid exits 0" eval 'status rep1 0 && says rep1 "^replaced mid (0x"'
	wait_for "(elsewhere)"
	run bt1 "$padrone" -p "$pid" bt
	run btj "$padrone" -p "$pid" bt -j
	if [ "$label" = "no unwind tables" ]; then
		check "$label: bt stops at leaf and says why" \
			eval 'status bt1 0 && says bt1 " in leaf+0x" && says bt1 "^the walk stopped at #[0-9]*: no FDE of .*cc_leaf.* covers 0x"'
	else
		check "$label: bt names the code-cache frame and says why the walk stopped there" \
			eval 'status bt1 0 && says bt1 " in leaf+0x" && says bt1 " in replacement of mid+0x[0-9a-f]* (\[code cache\])$" && says bt1 "^the walk stopped at #[0-9]*: 0x[0-9a-f]* is in anonymous memory, which has no unwind information$"'
	fi
	check "$label: bt -j says the same" \
		eval 'status btj 0 && says btj "\"end\":{\"complete\":false,\"reason\":\"no_unwind_info\",\"frame\":[0-9]*,\"pc\":\"0x[0-9a-f]*\",\"sp\":\"0x[0-9a-f]*\",\"why\":\""'
	run swap "$padrone" -p "$pid" restore -t 10000 mid ';' replace -t 10000 mid "$repl/mid_other.o"
	check "$label: restore, then another replacement, while leaf is to return into the first" \
		eval 'status swap 0 && says swap "^restored mid" && says swap "^replaced mid"'
	wait_for "round .* ok" 3
	check "$label: the target lives and computes right" fine
	run back "$padrone" -p "$pid" restore -t 10000 mid
	wait_for "round .* ok" 2
	check "$label: restored, it still does" eval 'status back 0 && fine'
	check "$label: and the thread was waited for, not left in freed code" \
		eval '! says swap "kept the code cache"'
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	pid=
}
variant "deleted executable" "$b/tests/targets/cc_leaf" deleted
variant "gcc -static" "$b/tests/targets/cc_leaf_static"
variant "no unwind tables" "$b/tests/targets/cc_leaf_nocfi"

# gap LABEL MIB [cfi]: bt, a patch that walks every stack and its undo;
# the stack's mapping must stay where it was
stack_start() { awk '/\[stack\]/ { split($1, r, "-"); print r[1] }' /proc/$pid/maps; }
gap() {
	label=$1
	"$b/tests/targets/cc_gap" "$2" ${3:-} >"$tmp/out" 2>&1 &
	pid=$!
	wait_for ready 1 0
	s0=$(stack_start)
	run gbt "$padrone" -p "$pid" bt
	if [ "${3:-}" = cfi ]; then
		check "$label: bt stops where the unwind information leads below the stack" \
			eval 'status gbt 0 && says gbt "^the walk stopped at #0: the frame at pc 0x[0-9a-f]* cannot be unwound: its unwind information leads to 0x[0-9a-f]*, which is not mapped$"'
	else
		check "$label: bt stops at the frame without unwind information" \
			eval 'status gbt 0 && says gbt "^the walk stopped at #0: no FDE of .*cc_gap covers 0x"'
	fi
	run gw "$padrone" -p "$pid" replace -w -f -t 300 gap_other "$b/tests/codecache/repl/side_alt.o:plus_one" ';' restore gap_other
	check "$label: a patch that walks every stack, and its undo" eval 'status gw 0'
	check "$label: none of it grew the stack" eval '[ "$(stack_start)" = "$s0" ]'
	kill -9 "$pid"
	wait "$pid" 2>/dev/null
	pid=
}
gap "frame pointer 1 MiB below the stack" 1
gap "unwind information 1 MiB below the stack" 1 cfi
label="padrone's stack unlimited, frame pointer 332 GiB below"
if (ulimit -s unlimited) 2>/dev/null; then
	(ulimit -s unlimited && gap "$label" $((332 * 1024)))
else
	for what in "bt" "a patch that walks every stack" "none of it grew the stack"; do
		skip "$label: $what" "the stack limit cannot be raised"
	done
fi
