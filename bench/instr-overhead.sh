#!/bin/sh
# Live instrumentation's cost to the target, per analysis level, beside cachegrind and lackey.
exec "${top_builddir:-.}/bench/instr-overhead" "$@"
