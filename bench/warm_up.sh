#!/usr/bin/env bash
# The server's start-up warm-up (every program `auto` can pick, built and run once before
# SERVING), with one context against contexts side by side (--warm-up-threads), alternated in one
# run. Each start begins with an empty Mesa shader cache, as a new pod or a fresh CI job does;
# then the same server starts again with the cache the first start left, as a restarted container
# does; then once with Mesa's cache disabled. Prints a Markdown table of the logged warm-up times.
#   bench/warm_up.sh [SERVER_BINARY] [RUNS] [THREADS]   (defaults: build/server/glimpse-server 2 auto)
set -euo pipefail
server=${1:-build/server/glimpse-server}
runs=${2:-2}
threads=${3:-0}
[ -x "$server" ] || { echo "no server binary at $server (build it: cmake --build build)" >&2; exit 2; }
export LP_NUM_THREADS=${LP_NUM_THREADS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# start LOG ENV... -- SERVER_ARGS...: starts the server, waits for the end of its warm-up, prints
# the seconds it logged ("-" if it exited first), stops it.
start() {
  local log=$1 envs=() pid
  shift
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  : >"$log"  # emptied here: the child opens it, maybe after the loop below reads the last start's
  env "${envs[@]}" "$server" --listen=127.0.0.1:0 --log-level=info "$@" >"$log" 2>&1 &
  pid=$!
  while ! grep -aq "GPU programs built" "$log"; do
    kill -0 "$pid" 2>/dev/null || { echo "-"; return; }
    sleep 0.2
  done
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
  grep -ao "can pick run once, in [0-9.]* s with [0-9]* context" "$log" |
    awk '{print $6 " (" $9 ")"}'
}

echo "| run | --warm-up-threads | empty cache: s (contexts) | cache of that start: s | cache disabled: s |"
echo "|---|---|---|---|---|"
for run in $(seq 1 "$runs"); do
  for t in 1 "$threads"; do
    cache="$work/cache-$run-$t"
    cold=$(start "$work/log" "MESA_SHADER_CACHE_DIR=$cache" -- --warm-up-threads="$t")
    again=$(start "$work/log" "MESA_SHADER_CACHE_DIR=$cache" -- --warm-up-threads="$t")
    off=$(start "$work/log" MESA_SHADER_CACHE_DISABLE=true -- --warm-up-threads="$t")
    echo "| $run | $t | $cold | $again | $off |"
  done
done
echo
echo "$(nproc) CPUs, LP_NUM_THREADS=$LP_NUM_THREADS; $(grep -ao 'GL context: .*' "$work/log" | head -1)"
