#!/bin/sh
# Stop-the-world pause p50/p99 for 1, 8 and 64 busy threads (goal p99 <= 1 ms at 8).
exec "${top_builddir:-.}/bench/attach-pause" "$@"
