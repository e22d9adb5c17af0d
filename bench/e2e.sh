#!/usr/bin/env bash
# The end-to-end benchmark from a fresh clone in one command: installs the packages (with
# OpenCV), builds glimpse-server (Release) in build/ (a no-op when current), installs the Python
# client into build/python-venv the README's way, and runs bench/e2e.py with LP_NUM_THREADS=2
# (llvmpipe's threads and OpenCV's) against a server and a peer service it starts. Arguments go
# to e2e.py, e.g.
#   bench/e2e.sh --markdown bench/results/e2e_llvmpipe.md --json e2e.json
#   bench/e2e.sh --rows 'histogram' --seconds 5
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/server_and_client.sh
. bench/server_and_client.sh
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
exec "$venv/bin/python" bench/e2e.py --server-binary build/server/glimpse-server "$@"
