#!/usr/bin/env bash
# Builds deploy/Dockerfile with a real container engine (docker where it runs, else podman) and
# runs the image as production does, then the compose file:
#   1. base: a registry's debian:12 if the engine has or can get one, else a Debian 12 minbase made
#      with debootstrap from this machine's Debian mirror (cached as a tarball, imported as
#      debian:12 and debian:12-slim);
#   2. build the image (timed; its size printed);
#   3. run it --read-only --user 10001 --tmpfs /tmp on loopback ports: SERVING within
#      GLIMPSE_IMAGE_SERVING_BOUND_S (10) seconds of `run`, the warm-up's log lines shown; a
#      histogram of samples/glimpse-sample.png through it equal to one counted here with numpy;
#      `glimpse health` inside the container; /metrics with glimpse_ series and that call counted;
#      `stop -t 30` (SIGTERM) ends it with exit code 0 within the grace;
#   4. compose.yaml with podman-compose (docker compose with docker): two server replicas and
#      Redis; an image uploaded through one replica is analysed by id through the other.
# Containers, pods and networks it made are removed on any exit; any failure exits non-zero.
#   deploy/image-test.sh
# Environment: GLIMPSE_IMAGE_SERVING_BOUND_S (10), GLIMPSE_IMAGE_TEST_CACHE
# (~/.cache/glimpse-image-test: the base tarball), GLIMPSE_IMAGE_TEST_ENGINE (docker | podman),
# GLIMPSE_IMAGE (glimpse:image-test). Needs root or a working rootless engine; debootstrap only
# when no debian:12 image is at hand; /usr/bin/python3 with numpy, OpenCV and PyYAML.
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$SECONDS
bound_s=${GLIMPSE_IMAGE_SERVING_BOUND_S:-10}
image=${GLIMPSE_IMAGE:-glimpse:image-test}
cache=${GLIMPSE_IMAGE_TEST_CACHE:-$HOME/.cache/glimpse-image-test}
sample=samples/glimpse-sample.png
py=/usr/bin/python3
tag="glimpse-image-test-$$"
work=$(mktemp -d)
containers=()
compose_up=""

say() { echo "== image-test: $*"; }
fail() {
  echo "image-test: FAIL: $*" >&2
  exit 1
}

engine=${GLIMPSE_IMAGE_TEST_ENGINE:-}
if [ -z "$engine" ]; then
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  elif command -v podman >/dev/null; then
    engine=podman
  else
    fail "no container engine: install podman (apt-get install podman runc netavark" \
      "aardvark-dns podman-compose debootstrap) or docker"
  fi
fi
if [ "$engine" = podman ] && [ -z "${CONTAINERS_CONF:-}" ]; then
  # No edits under /etc: the settings this host needs come from a file of the test's own.
  # Containers get the engine's rlimits unchanged (a host whose limits cannot be raised refuses
  # podman's defaults); on cgroups v1, runc and cgroupfs, which crun and systemd need v2 for.
  {
    echo "[containers]"
    echo "default_ulimits = []"
    if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
      echo "[engine]"
      echo 'cgroup_manager = "cgroupfs"'
      echo 'runtime = "runc"'
    fi
  } >"$work/containers.conf"
  export CONTAINERS_CONF="$work/containers.conf"
  # Compose's services find each other by name: netavark's aardvark-dns answers for them, the
  # CNI backend only with a dnsname plugin that Debian 12 does not ship, and podman keeps the
  # backend it first used on a host (CNI, if netavark came later). The compose step names
  # netavark; the builds and the single container keep the host's backend, through which
  # their RUN steps reach the package mirror (netavark's bridge did not, on a host that chose
  # CNI first).
  if [ -x /usr/lib/podman/netavark ]; then
    { cat "$work/containers.conf"; echo "[network]"; echo 'network_backend = "netavark"'; } \
      >"$work/containers-compose.conf"
  fi
fi
e() { "$engine" "$@"; }

cleanup() {
  local status=$?
  set +e
  if [ -n "$compose_up" ]; then
    (cd "$work" && $compose_up down -v >/dev/null 2>&1)
    # podman-compose 1.0.3's down leaves the project's network.
    [ "$engine" = podman ] && e network rm -f "${tag}_default" >/dev/null 2>&1
  fi
  for c in "${containers[@]}"; do
    e rm -f "$c" >/dev/null 2>&1
  done
  rm -rf "$work"
  if [ "$status" -eq 0 ]; then
    say "PASS in $((SECONDS - t_start)) s"
  else
    echo "image-test: FAILED (exit $status) after $((SECONDS - t_start)) s" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

image_exists() { e image inspect "$1" >/dev/null 2>&1; }

# 1. The base images the Dockerfile names.
say "engine: $($engine --version)"
if ! image_exists debian:12; then
  e pull -q docker.io/library/debian:12 >/dev/null 2>&1 && e tag docker.io/library/debian:12 debian:12 || true
fi
if ! image_exists debian:12; then
  tarball="$cache/debian-12-minbase.tar"
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || fail "no debian:12 image and no debootstrap to make one"
    mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]*/debian/?( |$)' /etc/apt/sources.list \
      /etc/apt/sources.list.d/* 2>/dev/null | head -n 1 | awk '{print $2}' || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    say "making a Debian 12 minbase with debootstrap from $mirror"
    t0=$SECONDS
    debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
      { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap failed (log above)"; }
    # As debian:12-slim: no package lists, downloaded packages, documentation or translations.
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* \
      "$work"/rootfs/usr/share/doc/* "$work"/rootfs/usr/share/man/* "$work"/rootfs/usr/share/locale/*
    mkdir -p "$cache"
    tar --numeric-owner -C "$work/rootfs" -c . >"$tarball.part"
    mv "$tarball.part" "$tarball"
    rm -rf "$work/rootfs"
    say "base made in $((SECONDS - t0)) s: $tarball ($(du -h "$tarball" | cut -f1))"
  fi
  e import "$tarball" debian:12 >"$work/import.log" 2>&1 ||
    { cat "$work/import.log" >&2; fail "$engine import $tarball failed"; }
  say "imported $tarball as debian:12"
fi
image_exists debian:12-slim || e tag debian:12 debian:12-slim

# 2. The image.
say "building $image from deploy/Dockerfile"
t0=$SECONDS
e build -f deploy/Dockerfile -t "$image" . >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; fail "image build failed (log tail above)"; }
build_s=$((SECONDS - t0))
grep -h "bake-shader-cache:" "$work/build.log" || true
size=$(e image inspect "$image" --format '{{.Size}}')
say "built in ${build_s} s; image size $((size / 1000000)) MB ($size bytes)"

client=""
[ -x build/client/glimpse ] && client=build/client/glimpse
glimpse_cli() { # glimpse_cli SERVER ARGS...: the host's client, else the image's on the host network
  local server=$1
  shift
  if [ -n "$client" ]; then
    "$client" --server="$server" "$@"
  else
    local args=() a
    for a in "$@"; do
      case $a in
        samples/*) args+=("/$a") ;;
        --json="$work"/*) args+=("--json=/out/${a#--json="$work"/}") ;;
        *) args+=("$a") ;;
      esac
    done
    e run --rm --network=host --user 0:0 -v "$PWD/samples:/samples:ro" -v "$work:/out" \
      --entrypoint /usr/local/bin/glimpse "$image" --server="$server" "${args[@]}"
  fi
}
host_port() { e port "$1" "$2/tcp" | head -n 1 | sed 's/.*://'; }
wait_serving() { # wait_serving CONTAINER LIMIT_S: seconds to SERVING, or fails
  local c=$1 limit=$2 t0=$SECONDS
  while [ $((SECONDS - t0)) -lt "$limit" ]; do
    if e exec "$c" /usr/local/bin/glimpse --server=127.0.0.1:50051 --timeout-s=2 health 2>/dev/null |
      grep -q SERVING; then
      return 0
    fi
    [ "$(e inspect "$c" --format '{{.State.Running}}')" = true ] || break
    sleep 0.2
  done
  e logs "$c" 2>&1 | tail -30 >&2
  fail "$c: no SERVING within $limit s (log above)"
}

# 3. One container, read-only, as production runs it.
name="$tag-server"
say "run $image --read-only --user 10001 --tmpfs /tmp"
containers+=("$name")
t0_ns=$(date +%s%N)
e run -d --name "$name" --read-only --user 10001:10001 --tmpfs /tmp \
  -p 127.0.0.1::50051 -p 127.0.0.1::9090 "$image" >/dev/null ||
  fail "$engine could not start a container from $image"
wait_serving "$name" 300
serving_ms=$((($(date +%s%N) - t0_ns) / 1000000))
say "SERVING $((serving_ms / 1000)).$(printf %03d $((serving_ms % 1000))) s after run (bound $bound_s s)"
e logs "$name" 2>&1 | grep -E 'renderer|warm-up' | sed 's/^/    /'
e logs "$name" 2>&1 | grep -E 'for shader cache|^glimpse-entrypoint:' &&
  fail "Mesa could not use its shader cache, or the image's was not copied (above)"
[ "$serving_ms" -le $((bound_s * 1000)) ] ||
  fail "SERVING after $serving_ms ms, over the bound of $bound_s s (GLIMPSE_IMAGE_SERVING_BOUND_S)"

port=$(host_port "$name" 50051)
metrics_port=$(host_port "$name" 9090)
# `/metrics` read: how many glimpse_ series it has, then how many Histogram calls it counted.
metrics_counts() {
  "$py" - "$metrics_port" <<'EOF'
import re, sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10).read().decode()
series = {l.split("{")[0].split(" ")[0] for l in body.splitlines() if l.startswith("glimpse_")}
m = re.search(r'^glimpse_calls_total\{code="OK",method="Histogram"\} (\d+)$', body, re.M)
print(len(series), m.group(1) if m else 0)
EOF
}
# The start-up warm-up's sample calls are no user's: none counted; the histogram below is one.
read -r _ histograms_before < <(metrics_counts) && [ -n "$histograms_before" ] ||
  fail "/metrics on 127.0.0.1:$metrics_port did not answer"
[ "$histograms_before" = 0 ] ||
  fail "/metrics counted $histograms_before Histogram calls before any was made"
say "histogram of $sample through 127.0.0.1:$port (client: ${client:-in the image})"
glimpse_cli "127.0.0.1:$port" histogram "$sample" --source=all --bins=256 --json="$work/h.json" |
  head -n 1
"$py" - "$sample" "$work/h.json" <<'EOF' || fail "the container's histogram differs from numpy's"
import json, sys
import cv2, numpy as np
img = cv2.imread(sys.argv[1], cv2.IMREAD_UNCHANGED)
img = img[:, :, [2, 1, 0]] if img.ndim == 3 else img[:, :, None]  # OpenCV reads BGR
ref = [np.bincount(img[:, :, c].ravel(), minlength=256).tolist() for c in range(img.shape[2])]
got = json.load(open(sys.argv[2]))["histograms"]
bad = [c for c in range(len(ref)) if c >= len(got) or got[c] != ref[c]]
print(f"histogram: {len(got)} channels x 256 bins, {img.shape[1]}x{img.shape[0]} pixels;",
      "equal to numpy's" if not bad and len(got) == len(ref) else f"channels {bad} differ")
sys.exit(1 if bad or len(got) != len(ref) else 0)
EOF
say "glimpse health inside the container"
e exec "$name" /usr/local/bin/glimpse --server=127.0.0.1:50051 health | grep SERVING ||
  fail "glimpse health in the container did not print SERVING"
say "/metrics on 127.0.0.1:$metrics_port"
read -r series histograms < <(metrics_counts) || true
echo "${series:-0} glimpse_ series; Histogram calls counted: ${histograms:-none} (${histograms_before} before)"
[ "${series:-0}" -gt 0 ] && [ "${histograms:-0}" = 1 ] ||
  fail "/metrics lacks glimpse_ series or the histogram call"
say "stop -t 30 (SIGTERM, then the server's drain)"
t0=$SECONDS
e stop -t 30 "$name" >/dev/null
stop_s=$((SECONDS - t0))
code=$(e inspect "$name" --format '{{.State.ExitCode}}')
say "stopped in $stop_s s, exit code $code"
[ "$code" = 0 ] || fail "exit code $code after SIGTERM, expected 0"
[ "$stop_s" -lt 30 ] || fail "the stop took the whole grace period: SIGTERM did not end the server"

# 4. compose.yaml: two replicas on one Redis. The copy the test runs differs from the file only
# where this host must: loopback ports picked by the engine, no GPU reservation, this build's image,
# a second server service, and (with no registry) a Redis image built from debian:12.
redis_image=redis:7.0-bookworm
if ! image_exists "$redis_image" && ! e pull -q "docker.io/library/$redis_image" >/dev/null 2>&1; then
  redis_image=glimpse-image-test-redis:bookworm
  if ! image_exists "$redis_image"; then
    say "no registry: building $redis_image from debian:12"
    # Protected mode off, as in the official image: the servers reach it from other addresses.
    printf '%s\n' 'FROM debian:12' \
      'RUN apt-get update -q && apt-get install -y -q --no-install-recommends redis-server && rm -rf /var/lib/apt/lists/*' \
      'RUN printf '"'"'#!/bin/sh\nexec /usr/bin/redis-server "$@" --protected-mode no\n'"'"' >/usr/local/bin/redis-server && chmod 755 /usr/local/bin/redis-server' \
      'USER redis' >"$work/Containerfile.redis"
    e build -t "$redis_image" -f "$work/Containerfile.redis" "$work" >"$work/redis-build.log" 2>&1 ||
      { tail -20 "$work/redis-build.log" >&2; fail "building $redis_image failed"; }
  fi
fi
"$py" - "$PWD" "$image" "$redis_image" "$work/compose.yaml" <<'EOF'
import copy, sys, yaml
repo, image, redis_image, out = sys.argv[1:]
c = yaml.safe_load(open(f"{repo}/deploy/compose.yaml"))
s = c["services"]
server = s["server"]
server.pop("build", None)
server["image"] = image
server["ports"] = ["127.0.0.1::50051", "127.0.0.1::9090"]
server.pop("deploy", None)
server["volumes"] = []  # each replica its own cache, as on separate hosts
s["redis"]["image"] = redis_image
s["server2"] = copy.deepcopy(server)
del s["client"]
c.pop("volumes", None)
yaml.safe_dump(c, open(out, "w"), sort_keys=False)
EOF
if [ "$engine" = docker ]; then
  compose_up="docker compose -p $tag -f $work/compose.yaml"
else
  command -v podman-compose >/dev/null || fail "podman-compose is not installed"
  compose_up="podman-compose -p $tag -f $work/compose.yaml"
fi
[ -f "$work/containers-compose.conf" ] && export CONTAINERS_CONF="$work/containers-compose.conf"
say "compose up: redis, server, server2"
t0=$SECONDS
(cd "$work" && $compose_up up -d >"$work/compose.log" 2>&1) ||
  { tail -30 "$work/compose.log" >&2; fail "compose up failed (log above)"; }
replicas=()
for svc in server server2; do
  # Named PROJECT_SERVICE_1 by podman-compose, PROJECT-SERVICE-1 by docker compose.
  c=$(e ps -a --filter "label=com.docker.compose.project=$tag" --format '{{.Names}}' |
    grep -E "[_-]${svc}[_-]1\$" | head -n 1 || true)
  [ -n "$c" ] || { tail -30 "$work/compose.log" >&2; fail "compose made no $svc container"; }
  replicas+=("$c")
done
for c in "${replicas[@]}"; do
  wait_serving "$c" 300
done
say "replicas SERVING $((SECONDS - t0)) s after compose up: ${replicas[*]}"
port1=$(host_port "${replicas[0]}" 50051)
port2=$(host_port "${replicas[1]}" 50051)
id=$(glimpse_cli "127.0.0.1:$port1" upload "$sample" | tail -n 1)
[ -n "$id" ] || fail "upload through ${replicas[0]} printed no id"
say "uploaded $sample through ${replicas[0]} as $id; histogram by id through ${replicas[1]}"
glimpse_cli "127.0.0.1:$port2" histogram "$id" --source=all --bins=256 --json="$work/h2.json" |
  head -n 1 || fail "histogram of $id through ${replicas[1]} failed"
cmp -s <("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["histograms"])' "$work/h.json") \
  <("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["histograms"])' "$work/h2.json") ||
  fail "the second replica's histogram of $id differs from the first container's"
say "the second replica analysed the first one's upload: the same counts"
