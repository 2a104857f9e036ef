#!/bin/sh
# Where a cpu-clock sample's cost goes: one VM exit, the floor (a sampling
# event that records nothing), each perf_event setting, padrone's backends;
# and what per-task events cost a target that switches often.
exec "${top_builddir:-.}/bench/profile-cost" "$@"
