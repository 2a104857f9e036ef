#!/bin/sh
# PLT stubs by the names profile gives them. plt_ifunc calls the glibc
# IFUNC strcasecmp through its PLT, so its GOT slot leads to the variant
# glibc chose (__strcasecmp_avx2, ...), to nothing named strcasecmp: only
# the slot's relocation names the stub strcasecmp@plt. cfg, disas and loops
# take NAME@plt and MODULE:NAME@plt as profile -j gives them, and show the
# stub, its jmp through that slot; an unknown NAME@plt is "no function
# named", status 2; replace, measure and instrument refuse a stub (by name
# or address) with the reason and where its slot leads (or that it is not
# bound yet), status 2, its code untouched, and the target goes on
# computing right.
b=${top_builddir:-.}
padrone=$b/src/padrone
prog=$b/tests/targets/plt_ifunc
. "$(dirname "$0")/../codecache/tap.sh"
tap_setup cfg-plt

echo "1..13"
: >"$tmp/out"
"$prog" -d 600 >"$tmp/out" 2>&1 &
pid=$!
wait_for '^tick' 2 0

# the oracles: the stub's and its GOT slot's link-time addresses from
# binutils, and where the program is mapped (its first PT_LOAD's page)
link_stub=0x$(objdump -d -j .plt -j .plt.sec "$prog" |
	sed -n 's/^0*\([0-9a-f]*\) <strcasecmp@plt>:$/\1/p' | tail -1)
link_slot=0x$(readelf -rW "$prog" | awk '$3 ~ /JUMP_SLOT/ && $5 ~ /^strcasecmp@/ { print $1 }')
first_load=$(readelf -lW "$prog" | awk '$1 == "LOAD" { print $3; exit }')
mapped=0x$(awk -v p="$(readlink -f "$prog")" '$6 == p { split($1, a, "-"); print a[1]; exit }' \
	"/proc/$pid/maps")
bias=$((mapped - (first_load & ~4095)))
stub=$(printf '%#x' $((bias + link_stub)))
slot=$(printf '%016X' $((bias + link_slot)))

# profile -j: the stub's name and module, as a user reads them (1-s
# profiles until one has sampled the stub, 90 s at most)
named() {
	"$padrone" -p "$pid" profile -u -j 1 >"$tmp/profile.out" 2>&1 &&
		grep -q '"name":"strcasecmp@plt","module":"[^"]*"' "$tmp/profile.out"
}
poll 90 named
pair=$(grep -o '"name":"strcasecmp@plt","module":"[^"]*"' "$tmp/profile.out" | head -1)
stub_name=$(echo "$pair" | sed 's/^"name":"\([^"]*\)".*/\1/')
stub_module=$(echo "$pair" | sed 's/.*"module":"\([^"]*\)"$/\1/')
qualified=$(basename "$stub_module"):$stub_name
check "profile -j names the stub strcasecmp@plt, module plt_ifunc" \
	eval '[ "$qualified" = "plt_ifunc:strcasecmp@plt" ]'

# stub NAME: cfg and disas of NAME show the stub at its address, its jmp
# through the GOT slot, a tail call to the slot's symbol
stub_shown() {
	run cfg "$padrone" -p "$pid" cfg "$1"
	run disas "$padrone" -p "$pid" disas "$1"
	status cfg 0 && says cfg "^function strcasecmp@plt at $stub: 1 blocks" &&
		grep -iq "^  0x[0-9a-f]*  \(bnd \)\{0,1\}jmp \[0x$slot\]$" "$tmp/cfg.out" &&
		says cfg "^tail call at 0x[0-9a-f]* -> (indirect) strcasecmp$" &&
		status disas 0 && says disas "^function strcasecmp@plt at $stub:" &&
		grep -iq "^  0x[0-9a-f]*  \(bnd \)\{0,1\}jmp \[0x$slot\]$" "$tmp/disas.out"
}
check "cfg and disas $stub_name: the stub at $stub, jmp through the GOT slot" stub_shown "$stub_name"
check "cfg and disas $qualified: the same" stub_shown "$qualified"
run json "$padrone" -p "$pid" cfg -j "$qualified"
check "cfg -j $qualified: entry $stub, name strcasecmp@plt" \
	eval 'status json 0 && says json "^{\"entry\":\"$stub\",\"name\":\"strcasecmp@plt\",\"error\":null,"'
run loops "$padrone" -p "$pid" loops "$stub_name"
check "loops $stub_name: none" eval 'status loops 0 && says loops "^function strcasecmp@plt at $stub: 0 loops$"'

run none "$padrone" -p "$pid" cfg no_such_function@plt
run nonem "$padrone" -p "$pid" disas plt_ifunc:no_such_function@plt
check "an unknown NAME@plt, MODULE:NAME@plt: no function named it, status 2" \
	eval 'status none 2 && says none "no function named '\''no_such_function@plt'\''" &&
		status nonem 2 && says nonem "no function named '\''plt_ifunc:no_such_function@plt'\''"'

# commands that patch a function refuse the stub before writing anything
printf 'int other_strcasecmp(const char *a, const char *b) { return a != b; }\n' >"$tmp/r.c"
${CC:-cc} -O2 -fPIC -c -o "$tmp/r.o" "$tmp/r.c"
before=$(code "$stub")
refused() {	# refused NAME OUT: status 2, the reason given
	status "$1" 2 && says "$1" "^padrone: $2 is a PLT stub of .*/plt_ifunc: it only jumps through its GOT slot, now to libc\.so\.6:[_a-z0-9]*; name that function instead$"
}
run replace "$padrone" -p "$pid" replace "$qualified" "$tmp/r.o:other_strcasecmp"
check "replace $qualified: refused, status 2, the slot's function named" refused replace "$qualified"
run measure "$padrone" -p "$pid" measure "$stub_name" 100
check "measure $stub_name: refused" refused measure "$stub_name"
run instrument "$padrone" -p "$pid" instrument "$stub_name"
check "instrument $stub_name: refused" refused instrument "$stub_name"
run byaddr "$padrone" -p "$pid" replace "$stub" "$tmp/r.o:other_strcasecmp"
check "replace $stub (its address): refused, naming it" \
	eval 'refused byaddr "$stub (strcasecmp@plt)"'
check "the stub's code is as it was ($before)" eval '[ "$(code "$stub")" = "$before" ]'
# exit@plt: called only for a bad option, so its slot waits for lazy binding
if readelf -dW "$prog" | grep -q 'BIND_NOW\|FLAGS.* NOW'; then
	skip "a stub not bound yet: refused, saying so" "$prog is linked -z now"
else
	run lazy "$padrone" -p "$pid" measure exit@plt 10
	check "a stub not bound yet: refused, saying so" \
		eval 'status lazy 2 && says lazy "^padrone: exit@plt is a PLT stub of .*/plt_ifunc: it only jumps through its GOT slot, not bound to exit yet (lazy binding); name that function instead$"'
fi

# the target's next ticks carry the checksums it computes alone
right() {
	wait_for '^tick' 3 &&
		for t in $(grep '^tick' "$tmp/out" | tail -3 | cut -d' ' -f2); do
			[ "$("$prog" -e "$t")" = "$(grep "^tick $t " "$tmp/out")" ] || return 1
		done
}
check "the target goes on computing right" eval 'right && fine'
