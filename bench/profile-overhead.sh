#!/bin/sh
# Sampling overhead on a busy target: padrone ring/bpf vs perf record, 999 Hz and 4 kHz.
exec "${top_builddir:-.}/bench/profile-overhead" "$@"
