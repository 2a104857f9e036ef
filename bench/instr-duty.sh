#!/bin/sh
# Switching instrumentation off and on: the target's rate native, off, on 10%, on 100%; a switch's cost.
exec "${top_builddir:-.}/bench/instr-duty" "$@"
