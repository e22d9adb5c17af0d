#!/usr/bin/env bash
# Installs the dependencies, builds Release into build/, starts glimpse-server in the background
# (the first GPU if there is one, else llvmpipe), waits until it reports SERVING, runs the sample
# client on the sample image (writing every output into out/), and stops the server.
#   deploy/run.sh [IMAGE]        IMAGE defaults to samples/glimpse-sample.png
# Environment: GLIMPSE_DEVICE (auto | software | EGL device index), GLIMPSE_PORT (50051),
# GLIMPSE_BUILD_DIR (build).
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh

image=${1:-samples/glimpse-sample.png}
port=${GLIMPSE_PORT:-50051}
out=out
build=${GLIMPSE_BUILD_DIR:-build}
mkdir -p "$out"

# A unity build, as deploy/test.sh's: half the compile time of a build from nothing.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLIMPSE_WERROR=ON -DCMAKE_UNITY_BUILD=ON
cmake --build "$build" --target glimpse-server glimpse

server_pid=""
stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" || true
  fi
}
trap stop_server EXIT

echo "== starting glimpse-server on 127.0.0.1:$port (log: $out/server.log)"
# With the start-up warm-up, as deployed: the GPU times the calls below report are the kernels'
# own, with no shader compile in them. On llvmpipe with an empty shader cache (a fresh machine)
# the warm-up takes about 50 s on 2 CPUs; the next runs find the programs in the cache.
"$build/server/glimpse-server" --listen="127.0.0.1:$port" --device="${GLIMPSE_DEVICE:-auto}" \
  >"$out/server.log" 2>&1 &
server_pid=$!
glimpse() { "$build/client/glimpse" --server="127.0.0.1:$port" "$@"; }
echo "== waiting for SERVING (first the warm-up runs every GPU program auto can pick once)"
for _ in $(seq 1 1200); do
  if glimpse --timeout-s=2 health >/dev/null 2>&1; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$out/server.log" >&2
    echo "run.sh: glimpse-server exited at start-up (log above)" >&2
    exit 1
  fi
  sleep 0.5
done
glimpse --timeout-s=2 health
grep -h "GPU programs built" "$out/server.log" || true

step() {
  echo "\$ glimpse $*"
  glimpse "$@"
}
step info
echo "\$ glimpse upload $image"
id=$(glimpse upload "$image")
step histogram "$id" --csv="$out/histogram.csv" --json="$out/histogram.json" \
  --png="$out/histogram.png"
step histogram "$id" --source=luma --csv="$out/histogram_luma.csv" \
  --png="$out/histogram_luma.png"
step integral "$id" --squared --npy="$out/integral.npy"
step compact "$id" --source=luma --lo=200 --hi=255 --csv="$out/compact_bright.csv"
step box "$id" --rx=4 --ry=4 --out="$out/box_9x9.png"
echo "\$ glimpse box $id --rx=2 --keep --label=blurred"
blurred=$(glimpse box "$id" --rx=2 --keep --label=blurred | tail -1)
step histogram "$blurred" --png="$out/histogram_box_5x5.png"
step list
step delete "$id" "$blurred"
echo "== outputs in $out/:"
ls -l "$out"
