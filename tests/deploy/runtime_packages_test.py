#!/usr/bin/env python3
"""Proves the runtime image's package list (deploy/install-deps.sh --runtime) holds what the built
programs need: every name is a real Debian 12 package; every library the programs link directly
comes from a listed package (or the base image's libc/libstdc++); every library they load, directly
or through others, comes from the list's dependency closure; and so do the libraries loaded at run
time by name: glvnd's libEGL.so.1 (glad's loader) and the Mesa EGL vendor and llvmpipe driver.

  runtime_packages_test.py PROGRAM...
"""

import glob
import json
import os
import re
import subprocess
import sys

import deploy_common as dc


def ldd(binary):
  """{soname: resolved path} of every shared library the dynamic loader maps for BINARY."""
  out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
  libs = {}
  for line in out.splitlines():
    m = re.match(r"\s*(\S+) => (\S+|not found)", line)
    if m:
      libs[m.group(1)] = m.group(2)
  return libs


def needed(binary):
  out = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True, check=True).stdout
  return re.findall(r"^\s*NEEDED\s+(\S+)", out, re.M)


def ldconfig_path(soname):
  out = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
  m = re.search(r"^\s*" + re.escape(soname) + r" \(libc6,x86-64[^)]*\) => (\S+)", out, re.M)
  if not m:
    m = re.search(r"^\s*" + re.escape(soname) + r" .*=> (\S+)", out, re.M)
  return m.group(1) if m else None


def main():
  programs = sys.argv[1:]
  if not programs:
    print(__doc__)
    return 2
  c = dc.Checker()
  runtime = dc.install_deps_packages("runtime")
  print(f"runtime list: {' '.join(runtime)}")

  # One apt call each for all names (each call reads the whole cache, ~1 s).
  show = subprocess.run(["apt-cache", "show", "--no-all-versions", *runtime], capture_output=True,
                        text=True).stdout
  versions = dict(re.findall(r"^Package: (\S+)\n(?:.+\n)*?Version: (\S+)", show, re.M))
  policy = subprocess.run(["apt-cache", "policy", *runtime], capture_output=True, text=True).stdout
  candidates = dict(re.findall(r"^(\S+):\n(?:\s+.*\n)*?\s+Candidate: (.+)$", policy, re.M))
  for pkg in runtime:
    c.check(pkg in versions, f"runtime package {pkg} is a Debian package (apt-cache show)")
    c.check(candidates.get(pkg, "(none)") != "(none)",
            f"runtime package {pkg} has an install candidate, got {candidates.get(pkg)}")
  print("versions: " + " ".join(f"{p}={v}" for p, v in versions.items()))
  closure = dc.dependency_closure(runtime + list(dc.BASE_PACKAGES))
  direct_ok = set(runtime) | set(dc.BASE_PACKAGES)
  used = set()

  for program in programs:
    name = os.path.basename(program)
    libs = ldd(program)
    missing = [s for s, p in libs.items() if p == "not found"]
    c.check(not missing, f"{name}: every library resolves, missing {missing}")
    owners = dc.owning_packages([p for p in libs.values() if p != "not found"])
    for soname, path in sorted(libs.items()):
      if path == "not found":
        continue
      pkg = owners.get(path)
      c.check(pkg is not None, f"{name}: {soname} ({path}) belongs to a Debian package")
      if pkg is not None:
        c.check(pkg in closure, f"{name}: {soname} from {pkg}, outside the runtime list's closure")
    for soname in needed(program):
      pkg = owners.get(libs.get(soname, ""))
      if pkg is None:
        continue
      used.add(pkg)
      c.check(pkg in direct_ok,
              f"{name}: links {soname} directly, from {pkg}: add {pkg} to runtime_pkgs in "
              f"deploy/install-deps.sh")
    print(f"{name}: {len(libs)} libraries, links {len(needed(program))} directly")

  # Loaded by name at run time, never seen by ldd.
  dynamic = {}
  egl = ldconfig_path("libEGL.so.1")
  c.check(egl is not None, "libEGL.so.1 (glvnd) is installed")
  if egl:
    dynamic["libEGL.so.1 (glad's EGL loader)"] = egl
  for vendor in sorted(glob.glob("/usr/share/glvnd/egl_vendor.d/*mesa*.json")):
    lib = json.load(open(vendor))["ICD"]["library_path"]
    path = lib if lib.startswith("/") else ldconfig_path(lib)
    if path:
      dynamic[f"{lib} (EGL vendor {os.path.basename(vendor)})"] = path
      dynamic[f"{vendor}"] = vendor
  for dri in ("swrast_dri.so",):
    found = glob.glob(f"/usr/lib/*/dri/{dri}")
    c.check(bool(found), f"Mesa's {dri} (llvmpipe) is installed")
    if found:
      dynamic[f"{dri} (llvmpipe)"] = found[0]
  c.check(any("vendor" in k for k in dynamic), "a Mesa EGL vendor file is installed")
  owners = dc.owning_packages(list(dynamic.values()))
  for what, path in dynamic.items():
    pkg = owners.get(path)
    c.check(pkg in runtime, f"{what} ({path}) comes from {pkg}, which should be in the runtime list")
    used.add(pkg)

  # The image should hold nothing the programs do not load (ca-certificates aside: the trust
  # store for TLS).
  unused = [p for p in runtime if p not in used and p != "ca-certificates"]
  c.check(not unused, f"runtime list: nothing the programs load comes from {unused}; drop them")
  return c.finish("runtime_packages")


if __name__ == "__main__":
  dc.main_guard(main)
