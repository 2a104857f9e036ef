#!/bin/sh
# REP recovery throughput (refs/s): one thread, and the recovery pool with 1 and 2
# recovery threads (and their ratio); REP size per reference.
exec "${top_builddir:-.}/bench/pipeline-recover" "$@"
