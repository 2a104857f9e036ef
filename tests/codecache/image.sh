#!/bin/sh
# What replace checks in the code it loads, before anything is allocated or
# written, on live targets that check their own results: a corrupt object
# (a section past the end of the file) is refused at once, dry run or not;
# an instruction this CPU lacks (AVX512-FP16) is refused naming it, while
# one it has (AVX2) is installed; objects with constructors (which would not
# run) are refused; in a C++ process, a replacement that calls other code
# (through which an exception can unwind) is refused naming the libstdc++ it
# maps and the call, while one that calls nothing is installed.
b=${top_builddir:-.}
padrone=$b/src/padrone
repl=$b/tests/codecache/repl
. "$(dirname "$0")/tap.sh"
tap_setup cc-image

echo "1..13"
"$b/tests/targets/cc_vecadd" >"$tmp/out" 2>&1 &
pid=$!
wait_for "^round" 1 0
entry=$("$padrone" -p "$pid" disas vecadd | sed -n '1s/^function vecadd at \(0x[0-9a-f]*\):.*/\1/p')
before=$(code "$entry")
# checksums: one, the same all along
same_sums() { [ "$(grep '^round' "$tmp/out" | awk '{ print $6 }' | sort -u | wc -l)" -eq 1 ]; }

# vecadd_avx2.o with its .text made 2 GiB long (section header 64 bytes
# each, sh_size at +32): before, the dry run allocated and filled 2 GiB
cp "$repl/vecadd_avx2.o" "$tmp/corrupt.o"
shoff=$(readelf -hW "$tmp/corrupt.o" | awk '/Start of section headers/ { print $5 }')
text=$(readelf -SW "$tmp/corrupt.o" 2>/dev/null | sed -n 's/^ *\[ *\([0-9]*\)\] \.text .*/\1/p')
printf '\000\000\000\200\000\000\000\000' |
	dd of="$tmp/corrupt.o" bs=1 seek=$((shoff + text * 64 + 32)) conv=notrunc 2>/dev/null
corrupt="padrone: $tmp/corrupt.o is corrupt: section .text (2147483648 bytes at offset 0x40) ends past the end of the file"
run dry "$padrone" -p "$pid" replace -n vecadd "$tmp/corrupt.o"
check "a dry run refuses a corrupt object, naming the section" \
	eval 'status dry 2 && says dry "^$corrupt"'
run real "$padrone" -p "$pid" replace vecadd "$tmp/corrupt.o"
check "... with the same message as the real replace" eval 'status real 2 && says real "^$corrupt"'

if grep -qw avx512fp16 /proc/cpuinfo; then
	skip "an instruction the CPU lacks is refused" "this CPU has AVX512-FP16"
	skip "... in a dry run too" "this CPU has AVX512-FP16"
else
	fp16='padrone: load: .*vecadd_fp16.o: `vcvtss2sh xmm[0-9]*, xmm[0-9]*, .*` at .text+0x[0-9a-f]* (vecadd+0x[0-9a-f]*) needs AVX512_FP16, which this CPU lacks'
	run fp16 "$padrone" -p "$pid" replace vecadd "$repl/vecadd_fp16.o"
	check "an instruction the CPU lacks is refused, naming it, its place and its ISA" \
		eval 'status fp16 2 && says fp16 "^$fp16"'
	run fp16n "$padrone" -p "$pid" replace -n vecadd "$repl/vecadd_fp16.o"
	check "... in a dry run too" eval 'status fp16n 2 && says fp16n "^$fp16"'
fi
ctor="has constructors (.init_array: 1 entry), which padrone does not run"
run ctor "$padrone" -p "$pid" replace vecadd "$repl/vecadd_ctor.o"
check "an object with a constructor is refused" \
	eval 'status ctor 2 && says ctor "^padrone: $repl/vecadd_ctor.o $ctor"'
run ctorso "$padrone" -p "$pid" replace vecadd "$repl/vecadd_ctor.so"
check "a shared object with one is refused naming it (frame_dummy does not count)" \
	eval 'status ctorso 2 && says ctorso "has constructors (.init_array: init_scale)"'
wait_for "^round" 2
check "nothing was written and the target computes right" \
	eval '[ "$(code "$entry")" = "$before" ] && fine && same_sums'
if grep -qw avx2 /proc/cpuinfo; then
	run avx2 "$padrone" -p "$pid" replace vecadd "$repl/vecadd_avx2.o"
	wait_for "^round" 3
	check "an object with instructions the CPU has (AVX2) is installed and computes right" \
		eval 'status avx2 0 && fine && same_sums'
else
	skip "an object with instructions the CPU has is installed" "no AVX2 here"
fi
kill -9 "$pid"
wait "$pid" 2>/dev/null

# C++: exceptions thrown by check_value through scaled
"$b/tests/targets/cc_throw" >"$tmp/out" 2>&1 &
pid=$!
if ! wait_for ready 1 0; then
	for d in "a replacement calling out is refused in a C++ process" "... in a dry run too" \
		 "nothing was written and the target computes right" \
		 "a replacement calling nothing is installed" "... and the target computes right"; do
		skip "$d" "no C++ compiler (cc_throw)"
	done
	exit 0
fi
wait_for "round .* ok"
scaled=$("$padrone" -p "$pid" disas scaled | sed -n '1s/^function scaled at \(0x[0-9a-f]*\):.*/\1/p')
before=$(code "$scaled")
throw="padrone: load: process $pid maps libstdc++.so.6[.0-9]*, and the replacement of scaled calls other code (\`call check_value\` at .text+0x[0-9a-f]* (scaled+0x[0-9a-f]*)): an exception thrown from there through it would abort the process"
run throw "$padrone" -p "$pid" replace scaled "$repl/throw_alt.o:scaled"
check "a replacement calling out is refused in a C++ process, naming the runtime and the call" \
	eval 'status throw 2 && says throw "^$throw"'
run thrown "$padrone" -p "$pid" replace -n scaled "$repl/throw_alt.o:scaled"
check "... in a dry run too" eval 'status thrown 2 && says thrown "^$throw"'
wait_for "round .* ok" 2
check "nothing was written and the target computes right" \
	eval '[ "$(code "$scaled")" = "$before" ] && fine'
run twice "$padrone" -p "$pid" replace twice "$repl/throw_alt.o:twice"
check "a replacement calling nothing is installed" eval 'status twice 0'
wait_for "round .* ok" 3
check "... and the target computes right, exceptions caught" \
	eval 'fine && [ "$(grep -c "round .* ok sum [0-9]* caught 1000$" "$tmp/out")" -ge 4 ]'
