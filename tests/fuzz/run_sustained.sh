#!/usr/bin/env bash
# A sustained run of one fuzz target at the lowest priority, its new inputs kept outside the source
# tree, then libFuzzer's final figures in one line (for tests/fuzz/README.md).
#   tests/fuzz/run_sustained.sh BUILD_DIR TARGET SECONDS [WORK_DIR]
# e.g. tests/fuzz/run_sustained.sh build-asan image_decode 900 /tmp/fuzz
# Afterwards, `fuzz_TARGET -merge=1 tests/fuzz/TARGET WORK_DIR/corpus/TARGET` adds to the seed
# corpus only the inputs that reach new coverage.
set -euo pipefail
build=$1 target=$2 seconds=$3 work=${4:-/tmp/glimpse-fuzz}
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work/corpus/$target"
log="$work/$target.log"
leaks=1
[ "$target" = analyze_request ] && leaks=0  # Mesa's allocations at exit are not ours
status=0
ASAN_OPTIONS=detect_leaks=$leaks nice -n 19 "$build/tests/fuzz/fuzz_$target" \
  -max_total_time="$seconds" -timeout=120 -rss_limit_mb=4096 -malloc_limit_mb=1024 -print_final_stats=1 \
  -artifact_prefix="$work/$target-" "$work/corpus/$target" "$src/$target" >"$log" 2>&1 || status=$?
final=$(grep -E '^#[0-9]+ +DONE' "$log" | tail -1 || true)
[ -n "$final" ] || final=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
stat() { grep "^stat::$1:" "$log" | awk '{print $2}'; }
echo "$target: exit $status, $(stat number_of_executed_units) runs, $(stat average_exec_per_sec) exec/s," \
     "$(ls "$work/corpus/$target" | wc -l) new inputs, peak RSS $(stat peak_rss_mb) MB; $final"
ls "$work/$target"-* 2>/dev/null || true
exit $status
