#!/usr/bin/env bash
# The end-to-end benchmark from a fresh clone in one command: installs the packages (with
# OpenCV), builds glimpse-server (Release) in build/ if it is not there, installs the Python
# client into build/python-venv the README's way, and runs bench/e2e.py with LP_NUM_THREADS=2
# (llvmpipe's threads and OpenCV's) against a server and a peer service it starts. Arguments go
# to e2e.py, e.g.
#   bench/e2e.sh --markdown bench/results/e2e_llvmpipe.md --json e2e.json
#   bench/e2e.sh --rows 'histogram' --seconds 5
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh --bench
if [ ! -x build/server/glimpse-server ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build --target glimpse-server
fi
venv=build/python-venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --no-index \
  --force-reinstall --no-deps ./client/python
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
exec "$venv/bin/python" bench/e2e.py --server-binary build/server/glimpse-server "$@"
