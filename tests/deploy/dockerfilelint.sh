#!/usr/bin/env bash
# Lints Dockerfiles with the pinned dockerfilelint (tests/deploy/dockerfilelint/package-lock.json),
# installed with `npm ci` into TOOLS_DIR (in the build folder; reinstalled only when the lock
# changes). Fails on any issue. Rules are set in a .dockerfilelintrc beside each Dockerfile.
#   dockerfilelint.sh TOOLS_DIR DOCKERFILE...
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tools=$1
shift

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: node and npm are needed to lint the Dockerfile (apt-get install nodejs npm)"
    exit 1
  fi
  echo "SKIP: node and npm not found (apt-get install nodejs npm); CI runs this lint"
  exit 77
fi

lock=$here/dockerfilelint/package-lock.json
bin=$tools/node_modules/.bin/dockerfilelint
if [ ! -x "$bin" ] || ! cmp -s "$lock" "$tools/package-lock.json"; then
  rm -rf "$tools"
  mkdir -p "$tools"
  cp "$here/dockerfilelint/package.json" "$lock" "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
fi
echo "dockerfilelint $("$bin" --version)"

for f in "$@"; do
  # dockerfilelint lints a missing file's NAME as Dockerfile text: refuse that.
  [ -f "$f" ] || { echo "FAIL: no such Dockerfile: $f"; exit 1; }
done
# JSON, counted here: the tool's own exit status is the issue count, which wraps at 256.
# One known false report is dropped: dockerfilelint 1.8 takes HEALTHCHECK option names as `--\w+`,
# so `--start-period` reads as an unknown `--start` ("Invalid Argument Format"). Such a report is
# dropped only when every option of that HEALTHCHECK is one Docker documents, written --name=value
# (tests/deploy/check_manifests.py checks the options too).
# The tool exits with its issue count: its report, not its status, decides.
report=$("$bin" -o json "$@" || true)
printf '%s' "$report" | /usr/bin/python3 -c '
import json, re, sys
KNOWN = {"--interval", "--timeout", "--start-period", "--start-interval", "--retries"}
def misread_healthcheck(issue):
  # The content is the instruction'"'"'s first line: the options, then CMD or a line continuation.
  words = issue["content"].strip().rstrip("\\").split()
  if issue["title"] != "Invalid Argument Format" or words[:1] != ["HEALTHCHECK"]:
    return False
  opts = words[1:words.index("CMD")] if "CMD" in words else words[1:]
  return bool(opts) and all(re.fullmatch(r"--[a-z-]+=\S+", o) and o.split("=")[0] in KNOWN
                            for o in opts)
report = json.load(sys.stdin)
total = 0
for f in report["files"]:
  kept = [i for i in f["issues"] if not misread_healthcheck(i)]
  for i in f["issues"]:
    note = "" if i in kept else " (dropped: dockerfilelint 1.8 misreads --start-period)"
    print("%s:%s: [%s] %s: %s%s" % (f["file"], i["line"], i["category"], i["title"], i["content"], note))
  print("%s: %d issues" % (f["file"], len(kept)))
  total += len(kept)
sys.exit(1 if total else 0)
'
