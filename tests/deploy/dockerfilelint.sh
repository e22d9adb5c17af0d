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
"$bin" -o json "$@" | /usr/bin/python3 -c '
import json, sys
report = json.load(sys.stdin)
for f in report["files"]:
  for i in f["issues"]:
    print("%s:%s: [%s] %s: %s" % (f["file"], i["line"], i["category"], i["title"], i["content"]))
  print("%s: %d issues" % (f["file"], f["issues_count"]))
sys.exit(1 if report["totalIssues"] else 0)
'
