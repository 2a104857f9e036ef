# kernel-counts.sh: whether padrone's per-PC counts of one of
# tests/targets/instr_kernel's kernels (axpy, axmy: per call, per element
# one read of x[i], one of y[i] and one write of o[i], n = 1000; and the
# ret's read of the stack) are exactly what its calls imply. Sourced by the
# shell tests that instrument the kernel, after tests/codecache/tap.sh's
# start_kernel: it reads $b (the build directory) and $base (where the
# running instr_kernel's program is mapped).
#
#   kernel_counts_exact REPORT FUNC LOOP_SLACK RET_SLACK
#
# REPORT is `padrone report`'s text (rows: Ir I1mr ILmr Dr D1mr DLmr Dw D1mw
# DLmw where). With C the calls seen (the entry's Ir), L the store's Dw and
# R the ret's Dr, it holds when both loads' Dr are L exactly, L is 1000 C
# give or take LOOP_SLACK calls' worth and R is C give or take RET_SLACK
# (threads inside the function at the install or the uninstall go into or
# out of the copy mid-call: the caller knows how many there can be), and
# FUNC's own row sums them (Dr 2 L + R, Dw L). It leaves C, L, R and FUNC's
# disassembly (dis: objdump's lines) set for further checks.
kernel_counts_exact() {
	kc_rep=$1 kc_f=$2 kc_loop=$3 kc_ret=$4
	dis=$(objdump -d --no-show-raw-insn "$b/tests/targets/instr_kernel" |
		awk -v f="<$kc_f>:" '$2 == f { on = 1; next } on && /^$/ { exit } on')
	kc_entry=$(nm "$b/tests/targets/instr_kernel" | awk -v f="$kc_f" '$3 == f { print $1 }')
	[ -n "$kc_entry" ] && [ -n "$dis" ] || return 1
	C=$(kc_row "$kc_entry" | awk '{ print $1 }')
	[ -n "$C" ] && [ "$C" -gt 0 ] || return 1
	kc_loads=$(echo "$dis" | awk '/mov +\(%r..,%rax,8\),%r|(add|sub) +\(%r..,%rax,8\),%r/ { sub(":", "", $1); print $1 }')
	kc_store=$(echo "$dis" | awk '/mov +%r..,\(%r..,%rax,8\)/ { sub(":", "", $1); print $1 }')
	kc_retpc=$(echo "$dis" | awk '/ret/ { sub(":", "", $1); print $1; exit }')
	[ "$(echo "$kc_loads" | wc -w)" = 2 ] && [ -n "$kc_store" ] && [ -n "$kc_retpc" ] || return 1
	L=$(kc_row "$kc_store" | awk '{ print $7 }')
	R=$(kc_row "$kc_retpc" | awk '{ print $4 }')
	[ -n "$L" ] && [ -n "$R" ] || return 1
	for kc_l in $kc_loads; do
		[ "$(kc_row "$kc_l" | awk '{ print $4 }')" = "$L" ] || return 1
	done
	kc_near "$L" $((1000 * C)) $((kc_loop * 1000)) && kc_near "$R" "$C" "$kc_ret" &&
	[ "$(awk -v f="$kc_f" '$10 == f { print $4, $7; exit }' "$kc_rep")" = "$((2 * L + R)) $L" ]
}
# kc_row OFFSET: the report's row of the instruction at OFFSET (hex, no 0x)
# in the program, which the report names by its address
kc_row() { awk -v pc="$(printf '0x%x' $((base + 0x$1)))" '$10 == pc' "$kc_rep"; }
kc_near() { [ $(($1 - $2)) -le "$3" ] && [ $(($2 - $1)) -le "$3" ]; }
