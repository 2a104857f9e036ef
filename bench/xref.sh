#!/bin/sh
# xref: the side-entry check's index of libc's branches, made and kept.
set -e
b=${top_builddir:-.}
"$b/bench/xref" "$b/tests/targets/cc_leaf" "$b/tests/codecache/repl/mid_other.o" "$@"
