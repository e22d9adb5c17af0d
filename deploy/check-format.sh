#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what clang-format makes of it (.clang-format at the
# root: Google style, 100 columns). The version is pinned, as formatting changes between releases:
# clang-format-15, installed by deploy/install-deps.sh.
#   deploy/check-format.sh        lists the files to format and exits 1 if there are any
#   deploy/check-format.sh --fix  formats them in place
set -euo pipefail
cd "$(dirname "$0")/.."
tool=clang-format-15
command -v "$tool" >/dev/null || { echo "check-format: $tool is missing (deploy/install-deps.sh)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- '*.cc' '*.h')
if [ "${1:-}" = "--fix" ]; then
  "$tool" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$tool" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} C++ files are not formatted ($tool):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "check-format: run deploy/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} C++ files formatted as $tool makes them"
