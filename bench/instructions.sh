#!/usr/bin/env bash
# Instructions executed per call of a kernel benchmark, counted by valgrind (callgrind): an A/B of
# two builds that a shared or noisy machine cannot blur, where timings drift by 1.5x within the hour.
# Each binary runs under callgrind once to fill a Mesa shader cache of its own, then twice on that
# cache, with N and N + 10 timed calls (no warm-up); the difference over 10 is one call: every
# dispatch, llvmpipe's worker threads and the driver's host work included. With the cache off
# both runs would compile every program, and LLVM's compile runs a different number of
# instructions from one binary to the next (its maps are ordered by address), which blurred a
# call's count by millions. Under valgrind llvmpipe generates code for the CPU valgrind presents
# (no AVX-512), so the counts compare builds, not this CPU's code. On a GPU it counts only the
# host side. Needs valgrind (apt-get install valgrind); each run takes about a minute at
# 1024x1024.
#
#   bench/instructions.sh BENCH_BINARY [BENCH_BINARY...] -- BENCH_ARGS...
#   bench/instructions.sh /tmp/old/box_filter_bench build/bench/box_filter_bench -- \
#       --sizes 1024x1024 --radii 32 --channels 4 --variants fused_strips
#
# Benchmarks that time their CPU reference with --runs (integral_image_bench: N / 2 of them) count
# that in too; it is the same in both builds, so compare the builds, not the absolute figure.
set -euo pipefail
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind not found" >&2; exit 2; }
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#bins[@]} -gt 0 ] || { echo "usage: $0 BENCH_BINARY... -- BENCH_ARGS..." >&2; exit 2; }
runs=2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {  # binary, runs -> instructions of the whole process
  local out="$work/callgrind.out"
  MESA_SHADER_CACHE_DIR="$work/cache-$(basename "$1")-$n" LP_NUM_THREADS="${LP_NUM_THREADS:-2}" \
    valgrind --tool=callgrind --callgrind-out-file="$out" --smc-check=all-non-file \
    "$1" "${@:3}" --runs "$2" --warmup 0 >/dev/null 2>"$work/log" ||
    { cat "$work/log" >&2; return 1; }
  awk '/^summary:/ {print $2}' "$out"
}
n=0
for b in "${bins[@]}"; do
  n=$((n + 1))
  count "$b" 1 "$@" >/dev/null  # fills a shader cache of this binary's own
  a=$(count "$b" "$runs" "$@")
  z=$(count "$b" $((runs + 10)) "$@")
  awk -v b="$b" -v a="$a" -v z="$z" 'BEGIN { printf "%s: %.1f M instructions per call\n", b, (z - a) / 10 / 1e6 }'
done
