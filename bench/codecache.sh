#!/bin/sh
# codecache: stop-the-world pause per patch, trampoline and measuring-stub cost.
set -e
b=${top_builddir:-.}
"$b/bench/codecache-cost"
"$b/bench/codecache-pause" "$@"
