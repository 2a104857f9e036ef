#!/usr/bin/env bash
# Install what padrone needs, build it twice with -Werror (plain, then with
# ASan+UBSan), run the whole test suite in each, and end with one line
# "N passed, M failed". Exit status 0 only if nothing failed.
set -u
top=$(cd "$(dirname "$0")" && pwd)
cd "$top"
scripts/install-deps || { echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0 skipped=0
count() {	# count DIR: add DIR/test-suite.log's totals
	local log=$1/test-suite.log
	if [ ! -f "$log" ]; then failed=$((failed + 1)); return; fi
	local n
	n=$(sed -n 's/^# PASS: *//p' "$log"); passed=$((passed + ${n:-0}))
	for k in FAIL ERROR XPASS; do
		n=$(sed -n "s/^# $k: *//p" "$log"); failed=$((failed + ${n:-0}))
	done
	n=$(sed -n 's/^# SKIP: *//p' "$log"); skipped=$((skipped + ${n:-0}))
}
suite() {	# suite NAME DIR CONFIGURE-OPTIONS...
	local name=$1 dir=$2; shift 2
	echo "=== $name build ($dir)"
	rm -f "$dir/test-suite.log"
	if ! scripts/build "$dir" --enable-werror "$@"; then
		echo "=== $name: build failed"
		failed=$((failed + 1))
		return
	fi
	echo "=== $name: make check"
	make -C "$dir" -s -j"$(nproc)" check >"$dir/check.out" 2>&1
	grep -E '^(FAIL|ERROR|XPASS|SKIP):' "$dir/check.out" | head -50
	sed -n '/^# TOTAL/,/^# ERROR/p' "$dir/test-suite.log" 2>/dev/null
	count "$dir"
}
suite plain build
suite asan build-asan --enable-sanitizers
[ "$skipped" -eq 0 ] || echo "($skipped skipped)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
