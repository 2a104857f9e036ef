#!/bin/sh
# libpadrone.so exports padrone.h's functions and nothing else: no internal
# padrone_ helpers (report builders, commands, parser), no other room's names.
lib="$top_builddir/.libs/libpadrone.so"
header="$top_srcdir/src/padrone.h"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "1..3"
nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | sort -u >"$tmp/exported"
grep -o '\bpadrone_[a-z0-9_]*(' "$header" | tr -d '(' | sort -u >"$tmp/declared"

bad=$(grep -v '^padrone_' "$tmp/exported" | head -5 | tr '\n' ' ')
if [ -s "$tmp/exported" ] && [ -z "$bad" ]; then
	echo "ok 1 - every exported function is padrone_* ($(wc -l <"$tmp/exported") of them)"
else
	echo "not ok 1 - exported outside padrone_*: $bad"
fi
extra=$(comm -23 "$tmp/exported" "$tmp/declared" | head -5 | tr '\n' ' ')
if [ -z "$extra" ]; then
	echo "ok 2 - nothing exported that padrone.h does not declare"
else
	echo "not ok 2 - exported but not in padrone.h: $extra"
fi
missing=$(comm -13 "$tmp/exported" "$tmp/declared" | head -5 | tr '\n' ' ')
if [ -z "$missing" ]; then
	echo "ok 3 - everything padrone.h declares is exported"
else
	echo "not ok 3 - declared in padrone.h but not exported: $missing"
fi
