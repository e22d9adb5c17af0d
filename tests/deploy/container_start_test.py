#!/usr/bin/env python3
"""Runs the runtime image's start command and health check on this machine the way the container
does, from deploy/Dockerfile itself:

- installs the build with the build stage's own `cmake --install` line into a scratch root and
  lays out the runtime stage's COPY lines there (binaries in <root>/usr/local/bin, the glvnd vendor
  file 10_nvidia.json beside Mesa's, which glvnd is pointed at);
- starts ENTRYPOINT + CMD (exec form, no shell) with the image's ENV (NVIDIA_* included), as the
  image's USER when run as root, GLIMPSE_LISTEN and GLIMPSE_METRICS_LISTEN moved to free loopback
  ports (the one change);
- runs the HEALTHCHECK command (port likewise moved) first with nothing listening (must fail), then
  until it passes, within the time Docker allows before it would call the container unhealthy;
- checks the server logged the GL renderer it got (llvmpipe on a machine without a GPU: the
  NVIDIA vendor file must not get in the way), that every library the running server mapped comes
  from the runtime package list's closure, that /metrics answers with the compose client's call
  counted, and that SIGTERM ends it with exit code 0 within --shutdown-grace-s.

  container_start_test.py --build-dir build
"""

import argparse
import glob
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

import deploy_common as dc

DOCKER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VENDOR_DIR = "/usr/share/glvnd/egl_vendor.d"


def free_port():
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def run_segments(stage):
  """Each `&&`-separated command of the stage's RUN lines, as word lists."""
  for inst in stage.all("RUN"):
    words = shlex.split(inst.args)
    segment = []
    for w in words + ["&&"]:
      if w in ("&&", ";"):
        if segment:
          yield segment
        segment = []
      else:
        segment.append(w)


def lay_out_image(stages, build_dir, root):
  """Install and copy as the Dockerfile does, under ROOT. Returns the runtime stage."""
  build, runtime = stages[0], stages[-1]
  segments = list(run_segments(build))
  configure = next(s for s in segments if s[:2] == ["cmake", "-S"])
  image_build_dir = configure[configure.index("-B") + 1]
  install = next(s for s in segments if s[:2] == ["cmake", "--install"])
  install = [build_dir if w == image_build_dir else w for w in install]
  prefix_at = install.index("--prefix") + 1
  install[prefix_at] = root + install[prefix_at]
  print("build stage install:", " ".join(install), flush=True)
  subprocess.run(install, check=True, stdout=subprocess.DEVNULL)

  for inst in runtime.all("COPY"):
    words = inst.args.split()
    from_stage = [w for w in words if w.startswith("--from=")]
    paths = [w for w in words if not w.startswith("--")]
    sources, dest = paths[:-1], paths[-1]
    for src in sources:
      src_path = root + src if from_stage else os.path.join(dc.REPO, src)
      if not from_stage and src.startswith("deploy/install-deps.sh"):
        continue  # used by RUN only
      target = root + dest
      if dest.endswith("/"):
        os.makedirs(target, exist_ok=True)
        target = os.path.join(target, os.path.basename(src))
      else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
      shutil.copy2(src_path, target)
      print(f"COPY {src} -> {dest}", flush=True)
  # What the runtime packages put beside the shipped vendor file (Mesa's 50_mesa.json).
  for vendor in glob.glob(os.path.join(VENDOR_DIR, "*.json")):
    target = root + VENDOR_DIR + "/" + os.path.basename(vendor)
    if not os.path.exists(target):
      shutil.copy2(vendor, target)
  print("EGL vendor files:", sorted(os.listdir(root + VENDOR_DIR)), flush=True)
  return runtime


def in_root(root, words):
  """Absolute paths that the image holds (binaries) point into ROOT."""
  return [root + w if w.startswith("/") and os.path.exists(root + w) else w for w in words]


def with_port(words, port):
  return [re.sub(r"^(--server=[^:]+:)\d+$", rf"\g<1>{port}", w) for w in words]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--build-dir", required=True)
  args = parser.parse_args()
  c = dc.Checker()

  stages = dc.parse_dockerfile()
  root = tempfile.mkdtemp(prefix="glimpse-image-")
  server = None
  try:
    os.chmod(root, 0o755)
    runtime = lay_out_image(stages, os.path.abspath(args.build_dir), root)
    env_image = runtime.env()
    workdir = runtime.last("WORKDIR").args if runtime.last("WORKDIR") else "/"
    os.makedirs(root + workdir, exist_ok=True)
    user = runtime.last("USER").args if runtime.last("USER") else "0"
    uid, _, gid = user.partition(":")
    as_user = []
    if os.geteuid() == 0 and uid.isdigit() and shutil.which("setpriv"):
      os.chown(root + workdir, int(uid), int(gid or uid))
      as_user = ["setpriv", f"--reuid={uid}", f"--regid={gid or uid}", "--clear-groups", "--"]

    entry = runtime.last("ENTRYPOINT").exec_form()
    cmd = runtime.last("CMD").exec_form() if runtime.last("CMD") else []
    start = in_root(root, entry + cmd)
    defaults, _ = dc.flag_defaults(start[0])
    grace_s = float(defaults["shutdown-grace-s"])
    options, health = dc.healthcheck(runtime.last("HEALTHCHECK"))
    port = free_port()
    health = with_port(in_root(root, health), port)
    try_timeout = dc.duration_s(options.get("--timeout", "30s"))
    allowed_s = (dc.duration_s(options.get("--start-period", "0s")) +
                 dc.duration_s(options.get("--interval", "30s")) * int(options.get("--retries", "3")))

    env = {"PATH": DOCKER_PATH, "HOME": root + workdir, "HOSTNAME": "glimpse"}
    env.update(env_image)
    env["GLIMPSE_LISTEN"] = f"127.0.0.1:{port}"
    metrics_port = None
    if env.get("GLIMPSE_METRICS_LISTEN"):
      metrics_port = free_port()
      env["GLIMPSE_METRICS_LISTEN"] = f"127.0.0.1:{metrics_port}"
    env["__EGL_VENDOR_LIBRARY_DIRS"] = root + VENDOR_DIR
    # The image's own user starts with no shader cache: its warm-up would compile every program
    # (minutes on llvmpipe). What it proves is tested in tests/service/warm_up_test.cc.
    env["GLIMPSE_WARM_UP"] = "0"
    if "LP_NUM_THREADS" in os.environ:  # CI's llvmpipe thread count; the image leaves it unset
      env["LP_NUM_THREADS"] = os.environ["LP_NUM_THREADS"]
    print("environment:", " ".join(f"{k}={v}" for k, v in sorted(env.items())), flush=True)

    # The health check must fail when nothing serves, or passing it proves nothing.
    t0 = time.monotonic()
    early = subprocess.run(health, env=env, capture_output=True, text=True, timeout=try_timeout + 5)
    c.check(early.returncode != 0,
            f"health check fails with no server (exit {early.returncode}): {early.stdout.strip()}")
    c.check(time.monotonic() - t0 <= try_timeout,
            f"health check gives up within HEALTHCHECK --timeout {try_timeout}s")

    log_path = os.path.join(root, "server.log")
    log = open(log_path, "w")
    print("start:", " ".join(as_user + start), flush=True)
    t0 = time.monotonic()
    server = subprocess.Popen(as_user + start, env=env, cwd=root + workdir, stdout=log,
                              stderr=subprocess.STDOUT)
    healthy_after = None
    last = None
    while time.monotonic() - t0 < allowed_s:
      if server.poll() is not None:
        break
      try:
        last = subprocess.run(health, env=env, capture_output=True, text=True, timeout=try_timeout)
      except subprocess.TimeoutExpired:
        last = None
      if last is not None and last.returncode == 0:
        healthy_after = time.monotonic() - t0
        break
      time.sleep(0.5)
    c.check(healthy_after is not None,
            f"HEALTHCHECK passes within {allowed_s:.0f}s (start-period + interval x retries); "
            f"last: {last and (last.returncode, last.stdout.strip(), last.stderr.strip())}")
    if healthy_after is not None:
      print(f"healthy after {healthy_after:.1f}s: {last.stdout.strip()}", flush=True)
      c.check("SERVING" in last.stdout, f"health check prints SERVING, got {last.stdout!r}")

      # Every library the running server mapped (EGL vendor, Mesa driver, LLVM included) must
      # come from what the runtime stage installs.
      maps = open(f"/proc/{server.pid}/maps").read()
      libs = sorted({l.split()[-1] for l in maps.splitlines()
                     if ".so" in l.split()[-1] and l.split()[-1].startswith("/")})
      libs = [l for l in libs if not l.startswith(root)]
      # This machine's NSS modules (nsswitch.conf: `files systemd`) and what they load are the
      # host's: the image's nsswitch.conf says `files`, which glibc has built in, and its
      # /etc/passwd names the image's user.
      nss = [l for l in libs if os.path.basename(l).startswith("libnss_")]
      host_only = set(nss)
      for module in nss:
        for line in subprocess.run(["ldd", module], capture_output=True, text=True).stdout.splitlines():
          m = re.match(r"\s*\S+ => (/\S+)", line)
          if m:
            host_only.add(m.group(1))
      owners = dc.owning_packages(libs)
      closure = dc.dependency_closure(dc.install_deps_packages("runtime") + list(dc.BASE_PACKAGES))
      outside = [f"{l} ({owners.get(l)})" for l in libs
                 if owners.get(l) not in closure and l not in host_only
                 and os.path.realpath(l) not in {os.path.realpath(h) for h in host_only}]
      c.check(not outside, f"server maps only runtime-list libraries; outside: {outside}")
      print(f"server maps {len(libs)} libraries; outside the runtime list's closure: {outside}; "
            f"host NSS modules ignored: {nss}", flush=True)

      # The services the Kubernetes probes ask for are SERVING on the real server.
      deployment = yaml.safe_load(open(os.path.join(dc.REPO, "deploy", "k8s", "deployment.yaml")))
      container = deployment["spec"]["template"]["spec"]["containers"][0]
      probed = sorted({(container.get(p) or {}).get("grpc", {}).get("service", "")
                       for p in ("startupProbe", "readinessProbe", "livenessProbe")
                       if (container.get(p) or {}).get("grpc")})
      for service in probed:
        probe = subprocess.run(health[:-1] + ["health", f"--service={service}"], env=env,
                               capture_output=True, text=True, timeout=try_timeout + 5)
        c.check(probe.returncode == 0 and "SERVING" in probe.stdout,
                f"k8s probe service {service!r} is SERVING, got {probe.returncode} {probe.stdout.strip()}")
      print(f"k8s probe services SERVING: {probed}", flush=True)

      # The compose client's command, as the image's user, output into a pipe this process owns
      # (as Docker's log pipe is the engine's, not the container user's).
      compose = yaml.safe_load(open(os.path.join(dc.REPO, "deploy", "compose.yaml")))
      client = compose["services"]["client"]
      client_env = dict(env)
      client_env.update({k: str(v) for k, v in client.get("environment", {}).items()})
      client_env["GLIMPSE_SERVER"] = f"127.0.0.1:{port}"
      client_argv = in_root(root, list(client["entrypoint"])) + list(client["command"])
      for volume in client.get("volumes", []):  # bind mounts: the host paths
        host, _, rest = str(volume).partition(":")
        target = rest.split(":")[0]
        host_path = os.path.normpath(os.path.join(dc.REPO, "deploy", host))
        client_argv = [host_path + a[len(target):] if a.startswith(target + "/") else a
                       for a in client_argv]
      run = subprocess.run(as_user + client_argv, env=client_env, cwd=root + workdir,
                           capture_output=True, text=True, timeout=120)
      print("compose client:", " ".join(client_argv), "->", run.returncode, flush=True)
      print(run.stdout[-1500:], run.stderr[-1500:], flush=True)
      c.check(run.returncode == 0, f"the compose client's command exits 0 as the image's user, "
              f"got {run.returncode}: {run.stderr.strip()[-300:]}")

      # Prometheus' view: the image serves /metrics, and the client's call is counted there.
      c.check(metrics_port is not None, "the image turns metrics on (GLIMPSE_METRICS_LISTEN)")
      if metrics_port is not None:
        try:
          body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                        timeout=10).read().decode()
        except OSError as e:
          body = f"(no answer: {e})"
        rpcs = {"histogram": "Histogram", "integral": "IntegralImage", "compact": "Compact",
                "box": "BoxFilter", "info": "GetServerInfo", "list": "ListImages"}
        method = next((rpcs[a] for a in client["command"] if a in rpcs), None)
        c.check(method is not None, f"the compose client runs one of {sorted(rpcs)}")
        counted = re.search(rf'^glimpse_calls_total{{code="OK",method="{method}"}} 1$', body, re.M)
        c.check(counted is not None and "glimpse_device_info{" in body,
                f"/metrics counts the compose client's {method} call and names the device; got "
                f"{body[:300]!r}")
        print(f"/metrics: {len(body)} bytes; {counted and counted.group(0)}", flush=True)

      server.send_signal(signal.SIGTERM)
      t1 = time.monotonic()
      try:
        rc = server.wait(timeout=grace_s + 10)
      except subprocess.TimeoutExpired:
        rc = None
      took = time.monotonic() - t1
      c.check(rc == 0, f"SIGTERM: exit code 0, got {rc}")
      c.check(took <= grace_s + 1, f"SIGTERM: exits within --shutdown-grace-s {grace_s}s, took {took:.1f}s")
      print(f"SIGTERM: exit {rc} after {took:.2f}s", flush=True)
    elif server.poll() is not None:
      c.check(False, f"server exited early with {server.returncode}")

    if server.poll() is None:
      server.kill()
      server.wait()
    log.close()
    text = open(log_path, errors="replace").read()
    print("---- server log ----\n" + text[-4000:] + "--------------------", flush=True)
    renderer = [l for l in text.splitlines() if re.search(r'renderer "', l)]
    c.check(bool(renderer), "server logs the GL renderer it got")
    if renderer and not glob.glob("/dev/nvidia[0-9]*"):
      c.check("llvmpipe" in renderer[0].lower(),
              f"no GPU here: the server falls back to llvmpipe, got {renderer[0]!r}")
  finally:
    if server is not None and server.poll() is None:
      server.kill()
    shutil.rmtree(root, ignore_errors=True)
  return c.finish("container_start")


if __name__ == "__main__":
  dc.main_guard(main)
