#!/usr/bin/env bash
# The peer benchmark from a fresh clone in one command: installs the packages (with OpenCV),
# builds glimpse-server (Release) in build/, installs the Python client into build/python-venv the
# README's way, and runs bench/peers.py against a server it starts. Arguments go to peers.py, e.g.
#   bench/peers.sh --runs 5 --markdown peers.md
#   bench/peers.sh --sizes 1024x1024 --cases 'box filter' --variants auto --no-cold
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/server_and_client.sh
. bench/server_and_client.sh
export LP_NUM_THREADS=${LP_NUM_THREADS:-$(nproc)}
exec "$venv/bin/python" bench/peers.py --server-binary build/server/glimpse-server "$@"
