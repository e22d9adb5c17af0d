#!/bin/sh
# The image's entry point: seeds Mesa's writable shader cache from the one baked into the image,
# then runs glimpse-server, which lies beside it, with the container's arguments (as PID 1:
# `exec`).
#
# llvmpipe needs its cache writable: Mesa 22.3 records the keys it holds in an index file that it
# opens read-write, and a shader whose key is missing there is compiled from source again even
# when its program is cached (deploy/bake-shader-cache.sh). So the baked cache is copied into
# MESA_SHADER_CACHE_DIR (a tmpfs /tmp on a read-only root), without overwriting what a volume
# there already holds. The copy is 7 MB; if it fails, the server starts anyway and compiles what
# it misses.
seed=/opt/glimpse/shader-cache
if [ -n "${MESA_SHADER_CACHE_DIR:-}" ] && [ -d "$seed" ]; then
  if ! err=$(mkdir -p "$MESA_SHADER_CACHE_DIR" 2>&1 &&
    cp -Rn "$seed/." "$MESA_SHADER_CACHE_DIR/" 2>&1); then
    echo "glimpse-entrypoint: the image's shader cache was not copied to" \
      "MESA_SHADER_CACHE_DIR=$MESA_SHADER_CACHE_DIR, so llvmpipe compiles its programs: $err" >&2
  fi
fi
exec "$(dirname "$0")/glimpse-server" "$@"
