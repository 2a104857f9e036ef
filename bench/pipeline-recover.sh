#!/bin/sh
# REP recovery throughput (refs/s), 1 and 2 workers; REP size per reference.
exec "${top_builddir:-.}/bench/pipeline-recover" "$@"
