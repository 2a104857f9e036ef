#!/bin/sh
# Cross-process ring throughput: CAB vs N-way vs FastForward at several chunk sizes.
exec "${top_builddir:-.}/bench/pipeline-rings" "$@"
