#!/usr/bin/env python3
"""Checks deploy/Dockerfile, deploy/compose.yaml and deploy/k8s/*.yaml against each other and
against the server's own defaults, read from `glimpse-server --help`: the port (--listen), the drain
time (--shutdown-grace-s), the connection-age limit, the health service names (proto/), the GPU
requests, the NVIDIA variables EGL needs, and the Prometheus metrics port (--metrics-listen, on in
the image through GLIMPSE_METRICS_LISTEN: exposed, published, declared and annotated for scraping).

  check_manifests.py --server build/server/glimpse-server [--client build/client/glimpse]
"""

import argparse
import fnmatch
import glob
import json
import os
import re
import subprocess

import yaml

import deploy_common as dc

IMAGE_BIN = "/usr/local/bin"
VENDOR_FILE = "/usr/share/glvnd/egl_vendor.d/10_nvidia.json"


# The last line of an entry-point script that hands PID 1 to the server installed beside it.
EXEC_SERVER = 'exec "$(dirname "$0")/glimpse-server" "$@"'


def entry_starts_server(entry, copies):
  """Whether ENTRYPOINT's program is the server, or a script COPY'd from deploy/ into the same
  directory whose last command execs the server beside it."""
  if entry == f"{IMAGE_BIN}/glimpse-server":
    return True
  sources = [w[0] for w in copies if len(w) == 2 and w[1] == entry and w[0].startswith("deploy/")]
  if len(sources) != 1 or os.path.dirname(entry) != IMAGE_BIN:
    return False
  with open(os.path.join(dc.REPO, sources[0])) as f:
    lines = [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
  return bool(lines) and lines[-1] == EXEC_SERVER


def check_capabilities(c, where, value):
  caps = {x.strip() for x in str(value or "").split(",")}
  c.check("graphics" in caps or "all" in caps,
          f"{where}: NVIDIA_DRIVER_CAPABILITIES={value!r} lacks graphics (EGL needs it)")
  c.check("compute" in caps or "all" in caps,
          f"{where}: NVIDIA_DRIVER_CAPABILITIES={value!r} lacks compute")


def check_server_args(c, where, args, known):
  for flag in dc.flags_in(args):
    c.check(flag in known, f"{where}: server flag --{flag} is not in glimpse-server --help")
  for a in args:
    if a.startswith("--max-connection-age-s="):
      c.check(a.split("=", 1)[1] != "0",
              f"{where}: --max-connection-age-s=0 keeps clients on old pods forever")


def redis_settings(args):
  """maxmemory (bytes), maxmemory-policy and port from redis-server arguments."""
  flat = [str(a) for a in args]
  values = {}
  for i, a in enumerate(flat):
    if a.startswith("--") and i + 1 < len(flat):
      values[a[2:]] = flat[i + 1]
  units = {"kb": 1000, "k": 1000, "mb": 10**6, "m": 10**6, "gb": 10**9, "g": 10**9}
  mem = values.get("maxmemory", "")
  m = re.fullmatch(r"(\d+)([a-z]*)", mem.lower())
  maxmemory = int(m.group(1)) * units.get(m.group(2), 1) if m else None
  return maxmemory, values.get("maxmemory-policy"), int(values.get("port", 6379))


def memory_bytes(q):
  """A Kubernetes or compose memory quantity in bytes."""
  m = re.fullmatch(r"(\d+)([A-Za-z]*)", str(q).strip())
  if not m:
    return None
  units = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 10**3, "M": 10**6, "G": 10**9,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9}
  return int(m.group(1)) * units.get(m.group(2), 0) or None


def check_store(c, where, args, limit, allowed_policies=("allkeys-lru", "volatile-lru",
                                                         "allkeys-lfu", "volatile-lfu",
                                                         "volatile-ttl", "noeviction")):
  """A Redis for images: maxmemory and its policy stated, below the memory limit."""
  maxmemory, policy, port = redis_settings(args)
  c.check(maxmemory is not None, f"{where}: states --maxmemory, got {args}")
  c.check(policy in allowed_policies, f"{where}: states --maxmemory-policy, got {policy!r}")
  lim = memory_bytes(limit) if limit is not None else None
  c.check(lim is not None, f"{where}: a memory limit, got {limit!r}")
  if maxmemory and lim:
    c.check(maxmemory < lim, f"{where}: --maxmemory {maxmemory} below the memory limit {lim}")
  return port


def redis_flag(c, where, args):
  """The server's --redis=HOST:PORT, split."""
  values = [a.split("=", 1)[1] for a in args if str(a).startswith("--redis=")]
  c.check(len(values) == 1 and ":" in values[0], f"{where}: --redis=HOST:PORT, got {values}")
  if len(values) != 1 or ":" not in values[0]:
    return None, None
  host, port = values[0].rsplit(":", 1)
  return host, int(port)
def metrics_address(env, args):
  """Where the server serves /metrics: --metrics-listen in ARGS, else GLIMPSE_METRICS_LISTEN."""
  for a in args:
    if a.startswith("--metrics-listen="):
      return a.split("=", 1)[1]
  return env.get("GLIMPSE_METRICS_LISTEN")


def check_metrics_port(c, where, env, args, metrics_port):
  address = metrics_address(env, args)
  if address is not None:
    c.check(address and dc.port_of(address) == metrics_port,
            f"{where}: metrics served on port {metrics_port} (the image's), got {address!r}")


def dockerignore_excludes(patterns, path):
  """Docker's rule: the last pattern matching the path or one of its parent folders wins."""
  parts = path.split("/")
  prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
  excluded = False
  for pattern in patterns:
    negate = pattern.startswith("!")
    pat = pattern[1:] if negate else pattern
    pat = pat.strip("/")
    if pat.startswith("**/"):
      hit = any(fnmatch.fnmatchcase(p.split("/")[-1], pat[3:]) for p in prefixes)
    else:
      hit = any(fnmatch.fnmatchcase(p, pat) for p in prefixes)
    if hit:
      excluded = not negate
  return excluded


def check_dockerfile(c, defaults, port, services):
  stages = dc.parse_dockerfile()
  c.check(len(stages) >= 2, "Dockerfile: multi-stage (a build stage and a runtime stage)")
  build, runtime = stages[0], stages[-1]
  c.check(build.base.startswith("debian:12") and runtime.base.startswith("debian:12"),
          f"Dockerfile: Debian 12 bases, got {build.base} and {runtime.base}")
  build_runs = " ".join(i.args for i in build.all("RUN"))
  c.check("deploy/install-deps.sh" in build_runs and "--runtime" not in build_runs,
          "Dockerfile build stage: installs with deploy/install-deps.sh (the CI script)")
  c.check("-DCMAKE_BUILD_TYPE=Release" in build_runs, "Dockerfile build stage: Release build")
  c.check("glimpse-server" in build_runs and "glimpse" in build_runs.replace("glimpse-server", ""),
          "Dockerfile build stage: builds glimpse-server and glimpse")
  # `cmake --install` fails on an install rule whose target the stage did not build.
  built = re.search(r"--target((?:\s+[\w-]+)+)", build_runs)
  built = set(built.group(1).split()) if built else set()
  for root, _, files in os.walk(dc.REPO):
    if os.path.relpath(root, dc.REPO).startswith(("build", ".git")):
      continue
    for f in files:
      if f == "CMakeLists.txt":
        text = open(os.path.join(root, f), encoding="utf-8").read()
        for m in re.finditer(r"install\s*\(\s*TARGETS\s+([^)]*?)\s+(?:RUNTIME|LIBRARY|ARCHIVE|DESTINATION|EXPORT)", text):
          for target in m.group(1).split():
            c.check(target in built, f"Dockerfile build stage: builds {target}, which "
                    f"{os.path.relpath(os.path.join(root, f), dc.REPO)} installs")
  runtime_runs = " ".join(i.args for i in runtime.all("RUN"))
  c.check("install-deps.sh --runtime" in runtime_runs,
          "Dockerfile runtime stage: installs the runtime list (install-deps.sh --runtime)")
  c.check(not any(w in runtime_runs for w in ("cmake", "g++", "-dev")),
          "Dockerfile runtime stage: no build tools")

  copies = [i.args.split() for i in runtime.all("COPY")]
  from_build = [w for w in copies if w and w[0].startswith("--from=")]
  c.check(any(f"--from={build.name}" == w[0] and w[-1].rstrip("/") == IMAGE_BIN
              and any(x.endswith("/glimpse-server") for x in w[1:-1])
              and any(x.endswith("/glimpse") for x in w[1:-1]) for w in from_build),
          f"Dockerfile: glimpse-server and glimpse copied from the build stage to {IMAGE_BIN}")
  c.check(["deploy/10_nvidia.json", VENDOR_FILE] in copies,
          f"Dockerfile: ships deploy/10_nvidia.json as {VENDOR_FILE}")
  vendor = json.load(open(os.path.join(dc.REPO, "deploy", "10_nvidia.json")))
  c.check(vendor.get("file_format_version") == "1.0.0"
          and vendor.get("ICD", {}).get("library_path") == "libEGL_nvidia.so.0",
          f"deploy/10_nvidia.json: glvnd ICD for libEGL_nvidia.so.0, got {vendor}")

  env = runtime.env()
  c.check(env.get("NVIDIA_VISIBLE_DEVICES") == "all", f"Dockerfile ENV NVIDIA_VISIBLE_DEVICES=all, got {env.get('NVIDIA_VISIBLE_DEVICES')!r}")
  caps = env.get("NVIDIA_DRIVER_CAPABILITIES")
  c.check(caps is not None and {x for x in caps.split(",")} == {"graphics", "compute", "utility"},
          f"Dockerfile ENV NVIDIA_DRIVER_CAPABILITIES=graphics,compute,utility, got {caps!r}")
  if "GLIMPSE_LISTEN" in env:
    c.check(dc.port_of(env["GLIMPSE_LISTEN"]) == port,
            f"Dockerfile ENV GLIMPSE_LISTEN={env['GLIMPSE_LISTEN']} port != server's {port}")

  user = runtime.last("USER")
  uid = user.args.split(":")[0] if user else "root"
  c.check(uid.isdigit() and int(uid) != 0,
          f"Dockerfile: runs as a numeric non-root USER (so runAsNonRoot can verify it), got {uid!r}")
  exposed = [int(p.split("/")[0]) for i in runtime.all("EXPOSE") for p in i.args.split()]
  c.check(port in exposed, f"Dockerfile: EXPOSE {port} (server's --listen default), got {exposed}")

  entry = runtime.last("ENTRYPOINT")
  entry_cmd = entry.exec_form() if entry else None
  c.check(entry_cmd is not None and entry_starts_server(entry_cmd[0], copies),
          f"Dockerfile: exec-form ENTRYPOINT starts {IMAGE_BIN}/glimpse-server, itself or through "
          f"a script of deploy/ that ends by exec'ing it (PID 1 gets SIGTERM), got {entry_cmd}")
  cmd = runtime.last("CMD")
  cmd_args = cmd.exec_form() if cmd else []
  c.check(cmd_args is not None, "Dockerfile: CMD in exec form")
  check_server_args(c, "Dockerfile ENTRYPOINT/CMD", (entry_cmd or [])[1:] + (cmd_args or []),
                    defaults)
  # The binary serves no metrics by default; the image turns them on.
  metrics = metrics_address(env, (entry_cmd or [])[1:] + (cmd_args or []))
  metrics_port = None
  c.check(bool(metrics), "Dockerfile: the image serves Prometheus metrics "
          f"(ENV GLIMPSE_METRICS_LISTEN or --metrics-listen), got {metrics!r}")
  if metrics:
    metrics_port = dc.port_of(metrics)
    c.check(metrics_port != port, f"Dockerfile: metrics port {metrics_port} differs from gRPC's")
    c.check(metrics_port in exposed, f"Dockerfile: EXPOSE {metrics_port} (metrics), got {exposed}")
  c.check(runtime.last("STOPSIGNAL") is None or runtime.last("STOPSIGNAL").args in ("SIGTERM", "15"),
          "Dockerfile: STOPSIGNAL is SIGTERM (the server drains on it)")

  hc = runtime.last("HEALTHCHECK")
  c.check(hc is not None, "Dockerfile: HEALTHCHECK")
  if hc:
    options, command = dc.healthcheck(hc)
    known = {"--interval", "--timeout", "--start-period", "--start-interval", "--retries"}
    c.check(set(options) <= known, f"Dockerfile HEALTHCHECK: options {sorted(options)} not all in {sorted(known)}")
    c.check(command[0] == f"{IMAGE_BIN}/glimpse" and command[-1] == "health",
            f"Dockerfile HEALTHCHECK: `glimpse ... health` (the gRPC health service), got {command}")
    servers = [a.split("=", 1)[1] for a in command if a.startswith("--server=")]
    c.check(len(servers) == 1 and dc.port_of(servers[0]) == port,
            f"Dockerfile HEALTHCHECK: --server on port {port}, got {servers}")
    timeouts = [float(a.split("=", 1)[1]) for a in command if a.startswith("--timeout-s=")]
    c.check(len(timeouts) == 1 and timeouts[0] < dc.duration_s(options.get("--timeout", "30s")),
            "Dockerfile HEALTHCHECK: the client's --timeout-s is set and shorter than --timeout")

  # The build context is the repository root: .dockerignore must let through every COPY source
  # and every tracked file the build reads, and keep build folders out.
  patterns = [l.strip() for l in open(os.path.join(dc.REPO, ".dockerignore"))
              if l.strip() and not l.startswith("#")]
  sources = [w for stage in stages for i in stage.all("COPY") for w in i.args.split()[:-1]
             if not w.startswith("--") and not any(x.startswith("--from") for x in i.args.split())]
  for src in sources:
    if src != ".":
      c.check(not dockerignore_excludes(patterns, src), f".dockerignore excludes COPY source {src}")
  try:
    tracked = subprocess.run(["git", "-C", dc.REPO, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split()
  except (OSError, subprocess.CalledProcessError):
    tracked = []
  # Every top-level folder the build descends into (one with a CMakeLists.txt), and cmake/.
  needed_dirs = tuple(sorted({f.split("/")[0] + "/" for f in tracked
                              if f.count("/") == 1 and f.endswith("/CMakeLists.txt")}
                             | {"cmake/"}))
  needed = [f for f in tracked if f == "CMakeLists.txt" or
            (f.startswith(needed_dirs) and not f.startswith("bench/results/"))]
  dropped = [f for f in needed if dockerignore_excludes(patterns, f)]
  c.check(not dropped, f".dockerignore drops files the build needs: {dropped[:10]}")
  c.check(dockerignore_excludes(patterns, "build/CMakeCache.txt")
          and dockerignore_excludes(patterns, ".git/HEAD"),
          ".dockerignore keeps build/ and .git out of the context")
  return (int(uid) if uid.isdigit() else None), metrics_port


def check_compose(c, defaults, port, grace_s, metrics_port):
  path = os.path.join(dc.REPO, "deploy", "compose.yaml")
  doc = yaml.safe_load(open(path))
  services = doc.get("services", {})
  server = services.get("server", {})
  build = server.get("build", {})
  c.check(os.path.realpath(os.path.join(dc.REPO, "deploy", build.get("context", ""))) ==
          os.path.realpath(dc.REPO) and build.get("dockerfile") == "deploy/Dockerfile",
          f"compose server: builds deploy/Dockerfile with the repository root as context, got {build}")
  published = [str(p).split(":")[-1].split("/")[0] for p in server.get("ports", [])]
  c.check(str(port) in published, f"compose server: publishes container port {port}, got {published}")
  env = server.get("environment", {})
  if isinstance(env, list):
    env = dict(e.split("=", 1) for e in env)
  check_capabilities(c, "compose server", env.get("NVIDIA_DRIVER_CAPABILITIES"))
  if "GLIMPSE_LISTEN" in env:
    c.check(dc.port_of(env["GLIMPSE_LISTEN"]) == port, f"compose server: GLIMPSE_LISTEN port {port}")
  devices = (server.get("deploy", {}).get("resources", {}).get("reservations", {})
             .get("devices", []))
  c.check(any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices),
          f"compose server: deploy.resources.reservations.devices with driver nvidia and "
          f"capabilities [gpu], got {devices}")
  stop = dc.duration_s(server.get("stop_grace_period", "10s"))
  c.check(stop > grace_s, f"compose server: stop_grace_period {stop}s > --shutdown-grace-s {grace_s}s")
  check_server_args(c, "compose server command", server.get("command") or [], defaults)
  check_metrics_port(c, "compose server", env, server.get("command") or [], metrics_port)
  c.check(str(metrics_port) in published,
          f"compose server: publishes the metrics port {metrics_port}, got {published}")

  store = services.get("redis", {})
  c.check(bool(store) and "redis" in str(store.get("image", "")),
          "compose: a redis service (the shared image store)")
  limit = store.get("mem_limit") or (store.get("deploy", {}).get("resources", {})
                                     .get("limits", {}).get("memory"))
  store_port = check_store(c, "compose redis", store.get("command") or [], limit)
  host, rport = redis_flag(c, "compose server command", server.get("command") or [])
  c.check(host == "redis" and rport == store_port,
          f"compose server: --redis names the redis service on port {store_port}, got {host}:{rport}")
  sdep = server.get("depends_on", {})
  c.check(isinstance(sdep, dict) and sdep.get("redis", {}).get("condition") == "service_healthy",
          "compose server: depends_on redis with condition service_healthy")

  client = services.get("client", {})
  c.check(bool(client), "compose: a client service")
  dep = client.get("depends_on", {})
  c.check(isinstance(dep, dict) and dep.get("server", {}).get("condition") == "service_healthy",
          "compose client: depends_on server with condition service_healthy")
  c.check(client.get("image") == server.get("image"), "compose client: the server's image")
  cenv = client.get("environment", {})
  args = client.get("command") or []
  targets = [a.split("=", 1)[1] for a in args if a.startswith("--server=")]
  targets += [cenv["GLIMPSE_SERVER"]] if "GLIMPSE_SERVER" in cenv else []
  c.check(targets and all(t.rsplit(":", 1)[0] == "server" and dc.port_of(t) == port for t in targets),
          f"compose client: targets server:{port}, got {targets}")
  # Files the client reads through its bind mounts exist in the repository.
  mounts = {}
  for volume in client.get("volumes", []):
    host, _, rest = str(volume).partition(":")
    target = rest.split(":")[0]
    host_path = os.path.normpath(os.path.join(dc.REPO, "deploy", host))
    c.check(os.path.isdir(host_path) or os.path.isfile(host_path),
            f"compose client: volume source {host} exists")
    mounts[target] = host_path
  for a in args:
    for target, host_path in mounts.items():
      if a.startswith(target + "/"):
        c.check(os.path.exists(host_path + a[len(target):]),
                f"compose client: {a} exists (mounted from {host_path})")
  return args


def check_k8s(c, defaults, port, grace_s, services, image_uid, metrics_port):
  docs = []
  for path in sorted(glob.glob(os.path.join(dc.REPO, "deploy", "k8s", "*.yaml"))):
    for doc in yaml.safe_load_all(open(path)):
      if doc is None:
        continue
      name = os.path.relpath(path, dc.REPO)
      c.check(all(k in doc for k in ("apiVersion", "kind", "metadata")) and
              doc["metadata"].get("name"), f"{name}: apiVersion, kind, metadata.name")
      docs.append((name, doc))
  def images(d):
    return [str(x.get("image", "")) for x in d["spec"]["template"]["spec"].get("containers", [])]
  workloads = [(n, d) for n, d in docs if d.get("kind") in ("Deployment", "StatefulSet")]
  deployments = [(n, d) for n, d in workloads if any(i.startswith("glimpse") for i in images(d))]
  stores = [(n, d) for n, d in workloads if any("redis" in i for i in images(d))]
  all_services = [(n, d) for n, d in docs if d.get("kind") == "Service"]
  c.check(len(deployments) == 1, f"deploy/k8s: one Deployment of the server, got {len(deployments)}")
  c.check(len(stores) == 1, f"deploy/k8s: one Redis Deployment or StatefulSet, got {len(stores)}")
  if not deployments:
    return
  name, dep = deployments[0]
  spec = dep["spec"]
  pod = spec["template"]["spec"]
  labels = spec["template"]["metadata"].get("labels", {})
  selector = spec["selector"].get("matchLabels", {})
  c.check(selector and all(labels.get(k) == v for k, v in selector.items()),
          f"{name}: selector matches the pod labels")
  containers = pod["containers"]
  server = containers[0]
  ports = {p.get("name"): p["containerPort"] for p in server.get("ports", [])}
  c.check(port in ports.values(), f"{name}: containerPort {port}, got {ports}")

  def selects(svc, pod_labels):
    sel = svc["spec"].get("selector", {})
    return bool(sel) and all(pod_labels.get(k) == v for k, v in sel.items())
  k8s_services = [(n, d) for n, d in all_services if selects(d, labels)]
  if stores:
    sname, store = stores[0]
    spod = store["spec"]["template"]["spec"]
    slabels = store["spec"]["template"]["metadata"].get("labels", {})
    redis_c = next(x for x in spod["containers"] if "redis" in str(x.get("image", "")))
    rport = check_store(c, sname, (redis_c.get("command") or [])[1:] + (redis_c.get("args") or []),
                        redis_c.get("resources", {}).get("limits", {}).get("memory"))
    sports = {p.get("name"): p["containerPort"] for p in redis_c.get("ports", [])}
    c.check(rport in sports.values(), f"{sname}: containerPort {rport}, got {sports}")
    c.check(not any(selects(d, slabels) for _, d in k8s_services) and
            not any(selects(d, labels) for _, d in all_services if selects(d, slabels)),
            f"{sname}: the server's Services and the store's select different pods")
    store_services = {d["metadata"]["name"]: d for _, d in all_services if selects(d, slabels)}
    host, hport = redis_flag(c, f"{name} args", server.get("args", []))
    svc = store_services.get((host or "").split(".")[0])
    c.check(svc is not None, f"{name}: --redis host {host!r} is a Service of the store, "
            f"one of {sorted(store_services)}")
    if svc is not None:
      reach = [p for p in svc["spec"].get("ports", []) if p["port"] == hport]
      target = reach[0].get("targetPort", hport) if reach else None
      resolved = sports.get(target) if isinstance(target, str) else target
      c.check(bool(reach) and resolved == rport,
              f"{name}: --redis port {hport} reaches the store's port {rport} through {host}")

  resources = server.get("resources", {})
  gpu_limit = resources.get("limits", {}).get("nvidia.com/gpu")
  c.check(isinstance(gpu_limit, int) and gpu_limit >= 1, f"{name}: nvidia.com/gpu limit, got {gpu_limit!r}")
  gpu_req = resources.get("requests", {}).get("nvidia.com/gpu", gpu_limit)
  c.check(gpu_req == gpu_limit, f"{name}: nvidia.com/gpu request equals limit (extended resource)")
  c.check(all(k in resources.get("requests", {}) for k in ("cpu", "memory")),
          f"{name}: cpu and memory requests")

  env = {e["name"]: e.get("value") for e in server.get("env", [])}
  check_capabilities(c, name, env.get("NVIDIA_DRIVER_CAPABILITIES"))
  c.check("NVIDIA_VISIBLE_DEVICES" not in env,
          f"{name}: leaves NVIDIA_VISIBLE_DEVICES to the device plugin (it names the allocated GPU)")
  if "GLIMPSE_LISTEN" in env:
    c.check(dc.port_of(env["GLIMPSE_LISTEN"]) == port, f"{name}: GLIMPSE_LISTEN port {port}")
  c.check(not server.get("command"), f"{name}: keeps the image's ENTRYPOINT")
  check_server_args(c, f"{name} args", server.get("args", []), defaults)
  check_metrics_port(c, name, env, server.get("args", []), metrics_port)
  c.check(ports.get("metrics") == metrics_port,
          f"{name}: containerPort {metrics_port} named metrics, got {ports}")
  notes = spec["template"]["metadata"].get("annotations", {})
  want = {"prometheus.io/scrape": "true", "prometheus.io/port": str(metrics_port),
          "prometheus.io/path": "/metrics"}
  for key, value in want.items():
    c.check(notes.get(key) == value,
            f"{name}: pod annotation {key}: {value!r}, got {notes.get(key)!r}")

  allowed = {""} | set(services)
  for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
    probe = server.get(probe_name)
    if probe is None:
      c.check(probe_name == "startupProbe", f"{name}: {probe_name}")
      continue
    grpc = probe.get("grpc")
    c.check(grpc is not None and grpc.get("port") == port,
            f"{name}: {probe_name} is a native grpc probe on port {port}, got {probe}")
    if grpc is not None:
      c.check(grpc.get("service", "") != "glimpse.v1.ImageStore",
              f"{name}: {probe_name} must not ask for glimpse.v1.ImageStore: a Redis outage "
              "would restart or unready the GPU pods")
      c.check(grpc.get("service", "") in allowed,
              f"{name}: {probe_name} service {grpc.get('service')!r} is '' or one of {services}")
  # One allowance for the start-up warm-up (minutes on llvmpipe without a shader cache): the
  # image's HEALTHCHECK must not call a server unhealthy sooner than the startupProbe gives up.
  startup = server.get("startupProbe") or {}
  allowed_s = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
  hc_options, _ = dc.healthcheck(dc.parse_dockerfile()[-1].last("HEALTHCHECK"))
  start_period = dc.duration_s(hc_options.get("--start-period", "0s"))
  c.check(start_period >= allowed_s,
          f"Dockerfile HEALTHCHECK: --start-period ({start_period:.0f}s) at least {name}'s startupProbe "
          f"allowance for the warm-up ({allowed_s}s)")
  ready = (server.get("readinessProbe") or {}).get("grpc") or {}
  c.check(ready.get("service") in services,
          f"{name}: readiness asks for the API service (SERVING once the GL context is up)")

  sleep_s = 0
  pre = server.get("lifecycle", {}).get("preStop", {})
  if "exec" in pre:
    cmd = pre["exec"]["command"]
    if cmd[0] == "sleep":
      sleep_s = float(cmd[1])
  elif "sleep" in pre:
    sleep_s = float(pre["sleep"]["seconds"])
  tgp = pod.get("terminationGracePeriodSeconds", 30)
  c.check(tgp > grace_s + sleep_s,
          f"{name}: terminationGracePeriodSeconds {tgp} > preStop {sleep_s}s + --shutdown-grace-s {grace_s}s")

  sec = pod.get("securityContext", {})
  c.check(sec.get("runAsNonRoot") is True, f"{name}: runAsNonRoot")
  if image_uid is not None and "runAsUser" in sec:
    c.check(sec["runAsUser"] == image_uid, f"{name}: runAsUser {sec['runAsUser']} is the image's USER {image_uid}")

  headless = [(n, s) for n, s in k8s_services if s["spec"].get("clusterIP") == "None"]
  cluster = [(n, s) for n, s in k8s_services
             if s["spec"].get("clusterIP") != "None" and s["spec"].get("type", "ClusterIP") == "ClusterIP"]
  c.check(len(headless) == 1, f"deploy/k8s: one headless Service (clusterIP: None), got {len(headless)}")
  c.check(len(cluster) == 1, f"deploy/k8s: one ClusterIP Service, got {len(cluster)}")
  for sname, svc in k8s_services:
    sel = svc["spec"].get("selector", {})
    c.check(sel and all(labels.get(k) == v for k, v in sel.items()), f"{sname}: selects the server pods")
    for p in svc["spec"].get("ports", []):
      target = p.get("targetPort", p["port"])
      resolved = ports.get(target) if isinstance(target, str) else target
      c.check(p["port"] == port and resolved == port,
              f"{sname}: port {p['port']} -> targetPort {target!r} reaches container port {port}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--server", required=True, help="the built glimpse-server")
  parser.add_argument("--client", help="the built glimpse client")
  args = parser.parse_args()

  c = dc.Checker()
  defaults, _ = dc.flag_defaults(args.server)
  for flag in ("listen", "shutdown-grace-s", "max-connection-age-s", "metrics-listen"):
    if not c.check(flag in defaults, f"glimpse-server --help lists --{flag} with its default"):
      return c.finish("check_manifests")
  port = dc.port_of(defaults["listen"])
  grace_s = float(defaults["shutdown-grace-s"])
  c.check(float(defaults["max-connection-age-s"]) > 0,
          "server default --max-connection-age-s > 0 (clients reconnect and reach new pods)")
  print(f"server defaults: port {port}, shutdown grace {grace_s}s, "
        f"max connection age {defaults['max-connection-age-s']}s")
  services = dc.proto_services()
  c.check(services, "proto/ declares the gRPC service the probes ask for")

  _, server_help = dc.flag_defaults(args.server)
  c.check("GLIMPSE_METRICS_LISTEN" in server_help,
          "glimpse-server --help says $GLIMPSE_METRICS_LISTEN sets --metrics-listen's default")
  uid, metrics_port = check_dockerfile(c, defaults, port, services)
  client_args = check_compose(c, defaults, port, grace_s, metrics_port)
  check_k8s(c, defaults, port, grace_s, services, uid, metrics_port)

  if args.client:
    cdefaults, help_text = dc.flag_defaults(args.client)
    # `glimpse [global flags] COMMAND [options]`: global flags are listed with defaults, the
    # command in the command list, its options in its usage line.
    command_at = next((i for i, a in enumerate(client_args) if not a.startswith("--")), None)
    c.check(command_at is not None, f"compose client: runs a command, got {client_args}")
    if command_at is not None:
      command = client_args[command_at]
      c.check(re.search(rf"(?m)^\s+{re.escape(command)}\b", help_text) is not None,
              f"compose client: command {command!r} is in glimpse --help")
      for flag in dc.flags_in(client_args[:command_at]):
        c.check(flag in cdefaults, f"compose client: global flag --{flag} is in glimpse --help")
      for flag in dc.flags_in(client_args[command_at + 1:]):
        c.check(f"--{flag}" in help_text, f"compose client: option --{flag} is in glimpse --help")
    hc = dc.parse_dockerfile()[-1].last("HEALTHCHECK")
    _, command = dc.healthcheck(hc)
    for flag in dc.flags_in(command[1:]):
      c.check(flag in cdefaults, f"Dockerfile HEALTHCHECK: flag --{flag} is in glimpse --help")
  return c.finish("check_manifests")


if __name__ == "__main__":
  dc.main_guard(main)
