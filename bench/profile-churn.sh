#!/bin/sh
# Short-lived threads: samples per CPU-second of the target, ring per-thread
# vs per-cpu vs bpf vs perf record -p, side by side.
exec "${top_builddir:-.}/bench/profile-churn" "$@"
