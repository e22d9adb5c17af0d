#!/bin/sh
# Fills a read-only shader cache for llvmpipe while the image is built, so that a container's
# start-up warm-up finds every program compiled instead of compiling them (40-80 s on 2 CPUs).
#   bake-shader-cache.sh DIR
# Runs glimpse-server on llvmpipe with Mesa's single-file cache (a Fossilize database) in a scratch
# directory until it answers SERVING (its warm-up has built every program), stops it with SIGTERM,
# and leaves the database in DIR as llvmpipe.foz + llvmpipe_idx.foz. At run time the image points
# MESA_DISK_CACHE_READ_ONLY_FOZ_DBS at it and MESA_SHADER_CACHE_DIR at a writable directory.
# llvmpipe keys its cache on the CPU's features and count: a host that differs from the builder
# misses, compiles as it would without the database, and runs correctly.
set -eu
dir=${1:?usage: bake-shader-cache.sh DIR}
scratch=$(mktemp -d)
log=$scratch/server.log
server=""
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

t0=$(date +%s)
# Port 0: the build may share the host's network (a chroot); the log says which port it got.
env -u MESA_DISK_CACHE_READ_ONLY_FOZ_DBS MESA_DISK_CACHE_SINGLE_FILE=1 \
  MESA_SHADER_CACHE_DIR="$scratch/cache" glimpse-server --listen=127.0.0.1:0 --metrics-listen= --device=software >"$log" 2>&1 &
server=$!
port=""
served=""
while [ $(($(date +%s) - t0)) -lt 600 ]; do
  kill -0 "$server" 2>/dev/null || break
  [ -n "$port" ] || port=$(sed -n 's/.*listening on .* (port \([0-9][0-9]*\)).*/\1/p' "$log" | head -n 1)
  if [ -n "$port" ] && glimpse --server="127.0.0.1:$port" --timeout-s=2 health >/dev/null 2>&1; then
    served=1
    break
  fi
  sleep 0.5
done
if [ -z "$served" ]; then
  cat "$log" >&2
  echo "bake-shader-cache: no SERVING within 600 s (server log above)" >&2
  exit 1
fi
kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
if [ "$status" -ne 0 ]; then
  cat "$log" >&2
  echo "bake-shader-cache: glimpse-server exited with $status after SIGTERM (log above)" >&2
  exit 1
fi
grep -h "renderer\|warm-up" "$log" || true

# One database: the directory named after llvmpipe's cache id (driver build and CPU).
set -- $(find "$scratch/cache" -name foz_cache.foz)
if [ $# -ne 1 ]; then
  echo "bake-shader-cache: expected one foz_cache.foz under $scratch/cache, found $#: $*" >&2
  exit 1
fi
mkdir -p "$dir"
cp "$1" "$dir/llvmpipe.foz"
cp "$(dirname "$1")/foz_cache_idx.foz" "$dir/llvmpipe_idx.foz"
chmod 0755 "$dir"
chmod 0444 "$dir/llvmpipe.foz" "$dir/llvmpipe_idx.foz"
echo "bake-shader-cache: $(wc -c <"$dir/llvmpipe.foz") bytes in $dir/llvmpipe.foz" \
  "(cache id $(basename "$(dirname "$(dirname "$1")")")), $(($(date +%s) - t0)) s"
