# Sourced by the benchmark scripts (bench/e2e.sh, bench/peers.sh, bench/nvidia/build.sh) from the
# repository root: installs the packages (with OpenCV), builds the Release glimpse-server in build/
# (a no-op when it is current) and installs the Python client package the README's way into
# build/python-venv, whose path it leaves in $venv.
./deploy/install-deps.sh --bench
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build build --target glimpse-server
venv=build/python-venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --no-index \
  --force-reinstall --no-deps ./client/python
