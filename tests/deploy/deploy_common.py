"""Shared helpers for the deployment checks: Dockerfile parsing, server defaults from --help."""

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKERFILE = os.path.join(REPO, "deploy", "Dockerfile")


class CheckError(Exception):
  pass


class Checker:
  """Collects failures so one run reports all of them."""

  def __init__(self):
    self.failures = []
    self.passed = 0

  def check(self, ok, what):
    if ok:
      self.passed += 1
    else:
      self.failures.append(what)
      print(f"FAIL: {what}", flush=True)
    return ok

  def finish(self, name):
    print(f"{name}: {self.passed} checks passed, {len(self.failures)} failed")
    return 1 if self.failures else 0


@dataclass
class Instruction:
  line: int
  keyword: str  # upper case
  args: str  # the rest, continuation lines joined

  def exec_form(self):
    """The JSON array of an exec-form CMD/ENTRYPOINT/RUN, or None for the shell form."""
    text = self.args.strip()
    if not text.startswith("["):
      return None
    return json.loads(text)


@dataclass
class Stage:
  base: str
  name: str
  instructions: list = field(default_factory=list)

  def all(self, keyword):
    return [i for i in self.instructions if i.keyword == keyword]

  def last(self, keyword):
    found = self.all(keyword)
    return found[-1] if found else None

  def env(self):
    """ENV key=value pairs, in order, later ones winning."""
    env = {}
    for inst in self.all("ENV"):
      words = shlex.split(inst.args)
      if len(words) >= 2 and "=" not in words[0]:  # legacy `ENV key value`
        env[words[0]] = " ".join(words[1:])
        continue
      for word in words:
        key, sep, value = word.partition("=")
        if not sep:
          raise CheckError(f"Dockerfile line {inst.line}: ENV word {word!r} has no '='")
        env[key] = value
    return env


def parse_dockerfile(path=DOCKERFILE):
  """Stages of a Dockerfile: instructions with continuation lines joined and comments dropped."""
  stages = []
  logical, start = "", 0
  lines = open(path, encoding="utf-8").read().split("\n")
  for number, raw in enumerate(lines, 1):
    stripped = raw.strip()
    if not logical and (not stripped or stripped.startswith("#")):
      continue
    if logical and stripped.startswith("#"):
      continue  # comment inside a continued instruction
    if not logical:
      start = number
    if stripped.endswith("\\"):
      logical += stripped[:-1] + " "
      continue
    logical += stripped
    keyword, _, args = logical.partition(" ")
    inst = Instruction(start, keyword.upper(), args.strip())
    logical = ""
    if inst.keyword == "FROM":
      words = inst.args.split()
      words = [w for w in words if not w.startswith("--")]
      name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else ""
      stages.append(Stage(words[0], name))
    elif not stages:
      if inst.keyword != "ARG":
        raise CheckError(f"Dockerfile line {start}: {inst.keyword} before the first FROM")
    else:
      stages[-1].instructions.append(inst)
  if logical:
    raise CheckError("Dockerfile ends inside a continued line")
  return stages


def healthcheck(inst):
  """(options dict, command list) of a HEALTHCHECK ... CMD [..] instruction."""
  match = re.match(r"((?:--[\w-]+=\S+\s+)*)CMD\s+(.*)$", inst.args, re.S)
  if not match:
    raise CheckError(f"Dockerfile line {inst.line}: HEALTHCHECK without CMD: {inst.args}")
  options = {}
  for opt in match.group(1).split():
    key, _, value = opt.partition("=")
    options[key] = value
  command = match.group(2).strip()
  if not command.startswith("["):
    raise CheckError(f"Dockerfile line {inst.line}: HEALTHCHECK CMD must be exec form (no shell)")
  return options, json.loads(command)


def duration_s(text):
  """Docker/compose duration ('10s', '1m30s', '500ms', bare number = seconds) in seconds."""
  if isinstance(text, (int, float)):
    return float(text)
  text = str(text).strip()
  if re.fullmatch(r"\d+(\.\d+)?", text):
    return float(text)
  total, pos = 0.0, 0
  units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
  for match in re.finditer(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text):
    if match.start() != pos:
      break
    total += float(match.group(1)) * units[match.group(2)]
    pos = match.end()
  if pos != len(text):
    raise CheckError(f"bad duration {text!r}")
  return total


def flag_defaults(binary):
  """{flag: default} from `binary --help`. Understands `--name  (default "value")`,
  absl's `--name (help); default: value;` and `--name=value  help`."""
  run = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
  text = run.stdout + run.stderr
  defaults = {}
  for match in re.finditer(r"(?m)^\s*--([\w-]+)\s+\(default:?\s*(\"[^\"]*\"|[^)\s]*)\)", text):
    defaults[match.group(1)] = match.group(2).strip('"')
  for match in re.finditer(r"--([\w-]+)\s+\((?:[^()]|\([^()]*\))*\);\s*default:\s*(\"[^\"]*\"|[^;\s]*);?",
                           text):
    defaults.setdefault(match.group(1), match.group(2).strip('"'))
  for match in re.finditer(r"(?m)^\s*--([\w-]+)=(\S*)", text):
    defaults.setdefault(match.group(1), match.group(2))
  if not defaults:
    raise CheckError(f"{binary} --help (exit {run.returncode}) lists no flags:\n{text}")
  return defaults, text


def port_of(address):
  """The port of HOST:PORT, [V6]:PORT or :PORT."""
  match = re.search(r":(\d+)$", str(address))
  if not match:
    raise CheckError(f"address {address!r} has no :PORT")
  return int(match.group(1))


def flags_in(args):
  """Flag names used in an argument list (`--name=value` or `--name`)."""
  return [a[2:].split("=", 1)[0] for a in args if a.startswith("--")]


def proto_services():
  """Fully qualified gRPC service names declared in proto/."""
  names = []
  for root, _, files in os.walk(os.path.join(REPO, "proto")):
    for f in files:
      if not f.endswith(".proto"):
        continue
      text = open(os.path.join(root, f), encoding="utf-8").read()
      package = re.search(r"(?m)^\s*package\s+([\w.]+)\s*;", text)
      for service in re.finditer(r"(?m)^\s*service\s+(\w+)", text):
        names.append((package.group(1) + "." if package else "") + service.group(1))
  return names


def install_deps_packages(mode):
  """The package list deploy/install-deps.sh installs in a mode ('build' or 'runtime')."""
  text = open(os.path.join(REPO, "deploy", "install-deps.sh"), encoding="utf-8").read()
  var = "runtime_pkgs" if mode == "runtime" else "build_pkgs"
  match = re.search(var + r"=\(([^)]*)\)", text)
  if not match:
    raise CheckError(f"deploy/install-deps.sh has no {var}=(...) list")
  body = re.sub(r"#[^\n]*", "", match.group(1))
  return body.split()


def main_guard(fn):
  try:
    sys.exit(fn())
  except CheckError as e:
    print(f"FAIL: {e}")
    sys.exit(1)


# Packages every debian:12-slim image has (libc, the C++ runtime): the runtime list need not name them.
BASE_PACKAGES = ("libc6", "libstdc++6", "libgcc-s1")


def dependency_closure(packages):
  """Every package apt installs for `apt-get install --no-install-recommends PACKAGES`
  (alternatives and virtual packages included, so this errs on the generous side)."""
  run = subprocess.run(
      ["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
       "--no-breaks", "--no-replaces", "--no-enhances", *packages],
      capture_output=True, text=True)
  if run.returncode != 0:
    raise CheckError(f"apt-cache depends failed: {run.stderr.strip()}")
  return {l.strip().strip("<>") for l in run.stdout.splitlines() if l and not l.startswith(" ")}


def owning_packages(paths):
  """{path: package name} for files dpkg knows, trying the usr-merged twin of each path."""
  candidates = {}
  for p in paths:
    forms = {p, os.path.realpath(p)}
    for f in list(forms):
      if f.startswith("/usr/lib/"):
        forms.add(f[4:])
      elif f.startswith("/lib/"):
        forms.add("/usr" + f)
    for f in forms:
      candidates[f] = p
  run = subprocess.run(["dpkg", "-S", *sorted(candidates)], capture_output=True, text=True)
  owners = {}
  for line in run.stdout.splitlines():
    pkgs, sep, path = line.partition(": ")
    if not sep or path not in candidates or pkgs.startswith("diversion"):
      continue
    owners[candidates[path]] = pkgs.split(",")[0].strip().split(":")[0]
  return owners
