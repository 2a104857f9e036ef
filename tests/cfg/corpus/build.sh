#!/bin/sh
# build.sh SRCDIR OUTDIR: build the cfg/ corpus in every configuration the
# tests check: {gcc,clang} x {-O0,-O2,-O3} x {pie,nopie}, two at a time;
# then variants: the corpus with CET and the stack protector
# (-fcf-protection -fstack-protector-strong -Wl,-z,ibtplt: endbr64 at every
# entry, notrack jumps, .plt.sec stubs, __stack_chk_fail), and bare.c
# alone, a non-PIE program that exports no symbol (with fatal.c as a
# library of its own).
# Each program is linked with --emit-relocs (jump-table relocations stay in
# .rela.rodata) and assembled with -L (local labels, loop headers among
# them, stay in .symtab); the stripped copy is what cfg/ analyses. clang's
# assembly is kept: its "Loop Header: Depth=N" comments are the loop oracle.
# Prints one line per program built.
set -eu
files="main switches loops irreducible noreturn tailcalls cold cleanup"

if [ "$1" = --one ]; then
	src=$2 out=$3 cc=$4 opt=$5 pie=$6 variant=${7:-}
	name=$cc$opt-$pie
	cflags="" ldflags=""
	case $variant in
	cet)
		name=$cc$opt-cet-$pie
		cflags="-fcf-protection -fstack-protector-strong"
		ldflags="-Wl,-z,ibtplt" ;;
	bare)
		name=bare-$cc$opt-$pie
		files=bare ;;
	esac
	case $pie in
	pie) pf="-fPIE -pie" ;;
	*) pf="-fno-pie -no-pie" ;;
	esac
	dir=$out/$name.d
	mkdir -p "$dir"
	for f in $files; do
		ff=""	# landing pads: cleanup.c is C built with exceptions
		[ "$f" = cleanup ] && ff=-fexceptions
		if [ "$cc" = clang ]; then
			# gas assembles clang's output too: no LLVM-only directives
			# shellcheck disable=SC2086
			clang $opt $pf $cflags $ff -fno-addrsig -w -S -o "$dir/$f.s" "$src/$f.c"
		else
			# shellcheck disable=SC2086
			gcc $opt $pf $cflags $ff -w -S -o "$dir/$f.s" "$src/$f.c"
		fi
	done
	if [ "$variant" = bare ]; then
		gcc -O2 -shared -fPIC -w -o "$dir/libcorpusfatal.so" "$src/fatal.c"
		ldflags="-L$dir -Wl,-rpath,$dir -lcorpusfatal"
	fi
	# shellcheck disable=SC2086
	gcc $pf -Wa,-L -Wl,--emit-relocs -o "$out/$name" "$dir"/*.s $ldflags
	strip -o "$out/$name.stripped" "$out/$name"
	echo "$out/$name"
	exit 0
fi

src=$1 out=$2
mkdir -p "$out"
{
	for cc in gcc clang; do
		for opt in -O0 -O2 -O3; do
			for pie in pie nopie; do
				echo "$cc $opt $pie"
			done
		done
	done
	echo "gcc -O2 pie cet"
	echo "clang -O2 nopie cet"
	echo "gcc -O2 nopie bare"
	echo "gcc -O3 nopie bare"
} | xargs -P 2 -L 1 sh "$0" --one "$src" "$out"
