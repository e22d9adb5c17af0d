#!/usr/bin/env python3
"""Builds the runtime stage of deploy/Dockerfile on a fresh Debian 12 root and runs it.

The root is debootstrap's minbase (close to debian:12-slim: nothing but the essential packages)
with this machine's Debian apt sources. Every runtime-stage instruction runs in order: COPY from
the repository or from the build's own `cmake --install` (the build stage's line), RUN in a
chroot as root (so `install-deps.sh --runtime` installs from the mirror onto a bare system),
ENV, USER, WORKDIR. Then ENTRYPOINT + CMD run as the image's user with the image's environment
(GLIMPSE_LISTEN and GLIMPSE_METRICS_LISTEN moved to free loopback ports), the HEALTHCHECK command
must pass, the compose client's command must succeed against the server, and SIGTERM must end it
with exit code 0.
This proves the runtime package list on a machine that has nothing else installed.

Needs root, debootstrap, unshare and the Debian mirror; the minbase root is cached as a tarball
in TOOLS_DIR. Opt-in (a few minutes, downloads): cmake -DGLIMPSE_FRESH_ROOT_TEST=ON.

  fresh_root_test.py --build-dir build --tools-dir build/tools
"""

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

import container_start_test as cst
import deploy_common as dc

SKIP = 77


def host_debian_sources():
  """This machine's deb822 Debian sources (the mirror CI can reach) and the archive URI."""
  path = "/etc/apt/sources.list.d/debian.sources"
  if not os.path.exists(path):
    return None, None
  text = open(path).read()
  uri = re.search(r"(?m)^URIs:\s*(\S+)\s*\n(?:#.*\n|[A-Z].*\n)*?Suites:.*\bbookworm\b", text)
  return text, uri.group(1) if uri else None


def prepare_root(tools_dir, sources, mirror):
  cache = os.path.join(tools_dir, "bookworm-minbase.tar")
  if not os.path.exists(cache):
    os.makedirs(tools_dir, exist_ok=True)
    fresh = tempfile.mkdtemp(prefix="glimpse-debootstrap-", dir=tools_dir)
    try:
      print(f"debootstrap --variant=minbase bookworm (mirror from this machine's apt sources)",
            flush=True)
      subprocess.run(["debootstrap", "--variant=minbase", "bookworm", fresh, mirror], check=True,
                     stdout=subprocess.DEVNULL)
      subprocess.run(["tar", "-C", fresh, "-cf", cache + ".tmp", "."], check=True)
      os.replace(cache + ".tmp", cache)
    finally:
      shutil.rmtree(fresh, ignore_errors=True)
  root = tempfile.mkdtemp(prefix="glimpse-fresh-root-")
  subprocess.run(["tar", "-C", root, "-xf", cache], check=True)
  os.chmod(root, 0o755)  # after tar, which gives "." the mode of the folder it was made from
  with open(os.path.join(root, "etc/apt/sources.list.d/debian.sources"), "w") as f:
    f.write(sources)
  if os.path.exists(os.path.join(root, "etc/apt/sources.list")):
    os.remove(os.path.join(root, "etc/apt/sources.list"))
  shutil.copy("/etc/resolv.conf", os.path.join(root, "etc/resolv.conf"))
  return root


def in_chroot(root, argv, env, user=None, workdir="/"):
  """ARGV in ROOT with exactly ENV, /proc mounted in a private mount namespace (gone when the
  process ends). exec all the way down: the returned process's pid is the program's."""
  return (["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
           'mount -t proc proc "$1/proc" && shift && exec "$@"', "sh", root, "chroot"] +
          ([f"--userspec={user}"] if user else []) +
          [root, "/usr/bin/env", "-i", "-C", workdir] + [f"{k}={v}" for k, v in env.items()] +
          list(argv))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--build-dir", required=True)
  parser.add_argument("--tools-dir", required=True)
  args = parser.parse_args()
  if os.geteuid() != 0:
    print("SKIP: needs root (debootstrap, chroot)")
    return SKIP
  missing = [t for t in ("debootstrap", "unshare", "chroot") if shutil.which(t) is None]
  if missing:
    print(f"SKIP: {' '.join(missing)} not found (apt-get install debootstrap)")
    return SKIP
  sources, mirror = host_debian_sources()
  if not mirror:
    print("SKIP: no Debian bookworm source in /etc/apt/sources.list.d/debian.sources")
    return SKIP

  c = dc.Checker()
  stages = dc.parse_dockerfile()
  build, runtime = stages[0], stages[-1]
  root = prepare_root(os.path.abspath(args.tools_dir), sources, mirror)
  staging = tempfile.mkdtemp(prefix="glimpse-build-stage-")
  server = None
  try:
    # The build stage's output, from its own install line.
    segments = list(cst.run_segments(build))
    configure = next(s for s in segments if s[:2] == ["cmake", "-S"])
    install = next(s for s in segments if s[:2] == ["cmake", "--install"])
    install = [os.path.abspath(args.build_dir) if w == configure[configure.index("-B") + 1] else w
               for w in install]
    install[install.index("--prefix") + 1] = staging + install[install.index("--prefix") + 1]
    subprocess.run(install, check=True, stdout=subprocess.DEVNULL)

    env = {"PATH": cst.DOCKER_PATH}
    user, workdir = None, "/"
    t0 = time.monotonic()
    for inst in runtime.instructions:
      if inst.keyword == "COPY":
        words = inst.args.split()
        from_build = any(w.startswith("--from=") for w in words)
        paths = [w for w in words if not w.startswith("--")]
        for src in paths[:-1]:
          source = staging + src if from_build else os.path.join(dc.REPO, src)
          dest = root + paths[-1]
          if paths[-1].endswith("/"):
            os.makedirs(dest, exist_ok=True)
            dest = os.path.join(dest, os.path.basename(src))
          else:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
          shutil.copy2(source, dest)
        print(f"COPY {inst.args}", flush=True)
      elif inst.keyword == "RUN":
        print(f"RUN {inst.args}", flush=True)
        run = subprocess.run(in_chroot(root, ["/bin/sh", "-c", inst.args], env, None, workdir),
                             capture_output=True, text=True)
        if not c.check(run.returncode == 0, f"RUN {inst.args} exits 0, got {run.returncode}:\n"
                       f"{run.stdout[-3000:]}{run.stderr[-3000:]}"):
          return c.finish("fresh_root")
        print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "", flush=True)
      elif inst.keyword == "ENV":
        env.update(dc.Stage("", "", [inst]).env())
      elif inst.keyword == "USER":
        user = inst.args
      elif inst.keyword == "WORKDIR":
        workdir = inst.args
        os.makedirs(root + workdir, exist_ok=True)
    print(f"runtime stage built in {time.monotonic() - t0:.0f}s", flush=True)
    c.check(os.path.exists(root + "/usr/share/glvnd/egl_vendor.d/50_mesa.json"),
            "the runtime list installs Mesa's EGL vendor file")

    # Docker sets HOME from the user's passwd entry.
    passwd = open(root + "/etc/passwd").read()
    uid = user.split(":")[0] if user else "0"
    home = next((l.split(":")[5] for l in passwd.splitlines() if l.split(":")[2] == uid), "/")
    env.setdefault("HOME", home)
    port = cst.free_port()
    env["GLIMPSE_LISTEN"] = f"127.0.0.1:{port}"
    if env.get("GLIMPSE_METRICS_LISTEN"):
      env["GLIMPSE_METRICS_LISTEN"] = f"127.0.0.1:{cst.free_port()}"
    if "LP_NUM_THREADS" in os.environ:
      env["LP_NUM_THREADS"] = os.environ["LP_NUM_THREADS"]

    entry = runtime.last("ENTRYPOINT").exec_form()
    cmd = runtime.last("CMD").exec_form() if runtime.last("CMD") else []
    options, health = dc.healthcheck(runtime.last("HEALTHCHECK"))
    health = cst.with_port(health, port)
    try_timeout = dc.duration_s(options.get("--timeout", "30s"))
    allowed_s = (dc.duration_s(options.get("--start-period", "0s")) +
                 dc.duration_s(options.get("--interval", "30s")) * int(options.get("--retries", "3")))
    grace_s = float(dc.flag_defaults(staging + "/opt/glimpse/bin/glimpse-server")[0]["shutdown-grace-s"])

    log_path = os.path.join(staging, "server.log")
    log = open(log_path, "w")
    server = subprocess.Popen(in_chroot(root, entry + cmd, env, user, workdir), stdout=log,
                              stderr=subprocess.STDOUT)
    t0 = time.monotonic()
    healthy, last = False, None
    while time.monotonic() - t0 < allowed_s and server.poll() is None:
      try:
        last = subprocess.run(in_chroot(root, health, env, user, workdir), capture_output=True,
                              text=True, timeout=try_timeout + 5)
        if last.returncode == 0:
          healthy = True
          break
      except subprocess.TimeoutExpired:
        pass
      time.sleep(0.5)
    c.check(healthy, f"HEALTHCHECK passes within {allowed_s:.0f}s in the fresh root; last: "
            f"{last and (last.returncode, last.stdout.strip(), last.stderr.strip())}")
    if healthy:
      print(f"healthy after {time.monotonic() - t0:.1f}s", flush=True)
      compose = yaml.safe_load(open(os.path.join(dc.REPO, "deploy", "compose.yaml")))
      client = compose["services"]["client"]
      client_env = dict(env)
      client_env.update({k: str(v) for k, v in client.get("environment", {}).items()})
      client_env["GLIMPSE_SERVER"] = f"127.0.0.1:{port}"
      client_argv = list(client["entrypoint"]) + cst.with_port(list(client["command"]), port)
      for volume in client.get("volumes", []):  # bind mounts, as copies
        host, _, rest = str(volume).partition(":")
        shutil.copytree(os.path.join(dc.REPO, "deploy", host), root + rest.split(":")[0])
      print("compose client:", " ".join(client_argv), flush=True)
      run = subprocess.run(in_chroot(root, client_argv, client_env, user, workdir),
                           capture_output=True, text=True, timeout=180)
      print(run.stdout[-3000:] or run.stderr[-3000:], flush=True)
      c.check(run.returncode == 0, f"the compose client's command exits 0, got {run.returncode}")

      server.send_signal(signal.SIGTERM)
      t1 = time.monotonic()
      try:
        rc = server.wait(timeout=grace_s + 10)
      except subprocess.TimeoutExpired:
        rc = None
      c.check(rc == 0, f"SIGTERM: exit code 0, got {rc}")
      c.check(time.monotonic() - t1 <= grace_s + 1, f"SIGTERM: exits within {grace_s}s")
    if server.poll() is None:
      server.kill()
      server.wait()
    log.close()
    text = open(log_path, errors="replace").read()
    print("---- server log (head) ----\n" + "\n".join(text.splitlines()[:6]), flush=True)
    c.check(re.search(r'renderer "', text) is not None, "server logs the GL renderer it got")
  finally:
    if server is not None and server.poll() is None:
      server.kill()
      server.wait()
    # Mounts lived in private namespaces that ended with their processes.
    with open("/proc/self/mounts") as mounts:
      busy = [l for l in mounts if f" {root}/" in l]
    if busy:
      print(f"not removing {root}: still mounted: {busy}")
    else:
      shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(staging, ignore_errors=True)
  return c.finish("fresh_root")


if __name__ == "__main__":
  dc.main_guard(main)
