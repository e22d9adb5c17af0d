#!/bin/sh
# Fills llvmpipe's shader cache while the image is built, so that a container's start-up warm-up
# finds every program compiled instead of compiling them (40-80 s on 2 CPUs).
#   bake-shader-cache.sh DIR
# Runs glimpse-server on llvmpipe with Mesa's single-file cache (a Fossilize database) in a scratch
# directory until it answers SERVING (its warm-up has built every program), stops it with SIGTERM,
# and starts it again until a start adds nothing to the cache (at most 5 starts): after the
# first start, which compiles everything, the next ones still add a few programs (124 KB and
# 41 KB of 6 MB on 2026-11-29, the fourth none or 5 KB: some of llvmpipe's keys differ from
# start to start). DIR then holds the cache directory as Mesa laid it out
# (mesa_shader_cache_sf/<cache id>/llvmpipe/): the database, its index, and the index of keys
# (`index`) that lets the GLSL compiler skip a shader whose program is cached. The image's entry
# point copies it into MESA_SHADER_CACHE_DIR at start: Mesa 22.3 reads a read-only database
# (MESA_DISK_CACHE_READ_ONLY_FOZ_DBS) but not that index, and without it compiles every shader's
# source again (SERVING 10 s instead of 2 s on 2 CPUs).
# llvmpipe keys its cache on the CPU's features and count: a host that differs from the builder
# misses, compiles as it would without the cache, and runs correctly.
set -eu
dir=${1:?usage: bake-shader-cache.sh DIR}
max_starts=5
scratch=$(mktemp -d)
log=$scratch/server.log
server=""
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

# One start: SERVING, then SIGTERM and a clean exit.
serve_once() {
  t0=$(date +%s)
  # Port 0: the build may share the host's network (a chroot); the log says which port it got.
  env -u MESA_DISK_CACHE_READ_ONLY_FOZ_DBS MESA_DISK_CACHE_SINGLE_FILE=1 \
    MESA_SHADER_CACHE_DIR="$scratch/cache" glimpse-server --listen=127.0.0.1:0 \
    --metrics-listen= --device=software >"$log" 2>&1 &
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
  grep -h "warm-up: [0-9]* GPU programs" "$log" || true
}

# The bytes in the cache's databases.
cache_bytes() {
  find "$scratch/cache" -name '*.foz' -exec cat {} + 2>/dev/null | wc -c
}

t_start=$(date +%s)
starts=0
before=-1
while :; do
  serve_once
  starts=$((starts + 1))
  after=$(cache_bytes)
  echo "bake-shader-cache: start $starts: $after bytes in the cache"
  [ "$after" -ne "$before" ] || break
  if [ "$starts" -ge "$max_starts" ]; then
    echo "bake-shader-cache: the cache still grew at start $starts; a container compiles the rest"
    break
  fi
  before=$after
done

# One cache: the directory named after llvmpipe's cache id (driver build and CPU).
set -- $(find "$scratch/cache" -name foz_cache.foz)
if [ $# -ne 1 ]; then
  echo "bake-shader-cache: expected one foz_cache.foz under $scratch/cache, found $#: $*" >&2
  exit 1
fi
cache=$(dirname "$1")
for f in foz_cache.foz foz_cache_idx.foz index; do
  if [ ! -s "$cache/$f" ]; then
    echo "bake-shader-cache: Mesa left no $f in $cache" >&2
    exit 1
  fi
done
mkdir -p "$dir"
cp -R "$scratch/cache/." "$dir/"
# Readable by the server's user; its copies at start must be writable, so no read-only bits.
chmod -R u=rwX,go=rX "$dir"
echo "bake-shader-cache: $(cache_bytes) bytes of database and $(wc -c <"$cache/index") of key" \
  "index in $dir (cache id $(basename "$(dirname "$cache")")), $starts starts," \
  "$(($(date +%s) - t_start)) s"
