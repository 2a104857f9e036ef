#!/bin/sh
# make install into a DESTDIR: programs, library, header, manual pages,
# padroned's systemd unit, bash completion and padrone.pc; then a client of
# padrone.h (src/examples/hotfuncs.c) built with pkg-config against that
# install profiles a live process; the unit passes systemd-analyze verify;
# the completion completes; --version tells the git describe.
b=$(cd "${top_builddir:-.}" && pwd)
s=$(cd "${top_srcdir:-.}" && pwd)
. "$s/tests/lib/tap.sh"
tap_init install
dest=$tmp/dest
tap_context() { [ -n "${log:-}" ] && tail -20 "$log"; }
echo "1..10"
prefix=$(sed -n 's/^prefix = //p' "$b/Makefile")
libdir=$(sed -n 's/^libdir = //p' "$b/Makefile" | sed "s|\${exec_prefix}|$prefix|")
log=$tmp/install.log
make -C "$b" -s install DESTDIR="$dest" >"$log" 2>&1
st=$?
p=$dest$prefix
check "make install DESTDIR=... succeeds (status $st)" test "$st" = 0
missing=
for f in bin/padrone sbin/padroned include/padrone.h lib/pkgconfig/padrone.pc \
	share/man/man1/padrone.1 share/man/man8/padroned.8 share/man/man3/padrone.3 \
	lib/systemd/system/padroned@.service share/bash-completion/completions/padrone \
	share/bash-completion/completions/padroned; do
	[ -e "$p/$f" ] || missing="$missing $f"
done
ls "$p"/lib/libpadrone.so* >/dev/null 2>&1 || missing="$missing lib/libpadrone.so"
check "it installs programs, library, header, manuals, unit, completion, padrone.pc${missing:+ (missing:$missing)}" \
	test -z "$missing"

# A client built the way padrone.h's users build: pkg-config.
export PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_PATH=$dest$libdir/pkgconfig
flags=$(pkg-config --cflags --libs padrone 2>"$tmp/pc.err")
# A sanitizer build's library needs its runtime loaded first: its clients
# are built with the same -fsanitize flags, as they would be by its users.
san=$(sed -n 's/^SANITIZER_CFLAGS = //p' "$b/Makefile")
log=$tmp/cc.log
cc -o "$tmp/hotfuncs" "$s/src/examples/hotfuncs.c" $san $flags >"$log" 2>&1
check "hotfuncs.c builds with \$(pkg-config --cflags --libs padrone) ($flags)" \
	test -x "$tmp/hotfuncs" -a -n "$flags"
"$b/tests/targets/prof_hot" >"$tmp/target.out" &
pid=$!
pids=$pid
sleep 0.3
log=$tmp/hot.out
LD_LIBRARY_PATH=$dest$libdir "$tmp/hotfuncs" "$pid" 1 3 >"$log" 2>&1
check "it profiles a live process through the installed libpadrone.so" \
	sh -c "grep -q prof_spin '$log' && ldd '$tmp/hotfuncs' | grep -q 'libpadrone.so'"
check "the target ran on, its checksum unchanged" \
	sh -c "kill -0 $pid && ! grep -q BAD '$tmp/target.out'"

# padroned@.service: a template unit systemd accepts.
unit=$p/lib/systemd/system/padroned@.service
log=$tmp/unit.log
if command -v systemd-analyze >/dev/null; then
	# verify needs the binary it runs to exist: the installed one, in place
	sed "s|ExecStart=$prefix|ExecStart=$p|" "$unit" >"$tmp/padroned@.service"
	cp "$tmp/padroned@.service" "$tmp/padroned@redis-server.service"
	SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$tmp/padroned@redis-server.service" >"$log" 2>&1
	st=$?
	check "systemd-analyze verify accepts padroned@redis-server.service (status $st)" \
		sh -c "test $st = 0 && grep -q -- '--pidof %I --every' '$unit'"
else
	n=$((n + 1))
	echo "ok $n # SKIP no systemd-analyze"
fi

# bash completion, from the installed file, with the installed programs
log=$tmp/comp.log
PATH=$p/bin:$p/sbin:$PATH bash -c "
	. '$p/share/bash-completion/completions/padrone'
	COMP_WORDS=(padrone pro); COMP_CWORD=1; _padrone padrone; echo \"1 \${COMPREPLY[*]}\"
	COMP_WORDS=(padrone -p 1 profile -); COMP_CWORD=4; _padrone padrone; echo \"2 \${COMPREPLY[*]}\"
	COMP_WORDS=(padroned --pi); COMP_CWORD=1; _padroned padroned; echo \"3 \${COMPREPLY[*]}\"
	COMP_WORDS=(padrone -p \"\"); COMP_CWORD=2; _padrone padrone; echo \"4 \${COMPREPLY[*]}\"
	COMP_WORDS=(padroned --pid 1 --i); COMP_CWORD=3; _padroned padroned; echo \"5 \${COMPREPLY[*]}\"
	COMP_WORDS=(padroned --pid 1 --D); COMP_CWORD=3; _padroned padroned; echo \"6 \${COMPREPLY[*]}\"
	COMP_WORDS=(padrone -p 1 instrument -m \"\"); COMP_CWORD=5; _padrone padrone; echo \"7 \${COMPREPLY[*]}\"
	COMP_WORDS=(padrone -p 1 instrument --h); COMP_CWORD=4; _padrone padrone; echo \"8 \${COMPREPLY[*]}\"
" >"$log" 2>&1
check "bash completion: commands, their options, padroned's options, PIDs" \
	sh -c "grep -qx '1 profile' '$log' && grep -q '^2 .*--format' '$log' &&
		grep -qx '3 --pid --pidof' '$log' && grep -qw $pid '$log'"
check "bash completion: padroned --instrument, --D1; instrument's modes and --hot" \
	sh -c "grep -qx '5 --idle-timeout --instrument' '$log' && grep -qx '6 --D1' '$log' &&
		grep -qx '7 exhaustive sample' '$log' && grep -qx '8 --hot' '$log'"

# --version everywhere, with the git describe of a checkout
log=$tmp/version.log
for prog in bin/padrone sbin/padroned; do
	LD_LIBRARY_PATH=$dest$libdir "$p/$prog" --version
done >"$log" 2>&1
"$b/padrone-sim" --version >>"$log" 2>&1
want=$(cd "$s" && git describe --always --dirty 2>/dev/null)
check "padrone, padroned and padrone-sim --version${want:+ say git $want}" \
	sh -c "test \$(grep -c '^padrone[a-z-]* [0-9][0-9.]*${want:+ (git [0-9a-z.-]*)}$' '$log') = 3"
check "padrone.pc names the version" \
	sh -c "pkg-config --modversion padrone | grep -qx \"\$(sed -n 's/^Version: //p' '$b/padrone.pc')\""
exit 0
