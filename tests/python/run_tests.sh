#!/usr/bin/env bash
# Installs the Python client the README's way (a venv on Debian's python3-grpcio, -protobuf and
# -numpy, pip with no package index) into a fresh venv in WORK_DIR, then runs the pytest suite
# against a glimpse-server binary it starts itself.
#   run_tests.sh SERVER_BINARY SOURCE_DIR WORK_DIR [PYTEST_ARGS...]
set -euo pipefail
server=$(realpath "$1")
src=$(realpath "$2")
work=$3
shift 3
rm -rf "$work/venv"
mkdir -p "$work"
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --no-index \
  "$src/client/python"
cd "$work"  # so the package is imported from the venv, not from the source tree
export GLIMPSE_SERVER_BINARY=$server PYTHONDONTWRITEBYTECODE=1
exec "$work/venv/bin/python" -m pytest -p no:cacheprovider -rs "$src/tests/python" "$@"
