#!/usr/bin/env bash
# Fails when a tracked C/C++/CUDA file differs from what clang-format makes of
# it (.clang-format at the top, and the C adapters' own in ucx_tl/uct and
# mpi_coll/component). The style is pinned to Debian 12's clang-format 14:
# other versions lay out some constructs differently.
#   scripts/check-format.sh          check, list the files that differ
#   scripts/check-format.sh --fix    rewrite them in place
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || true)
[[ -n $cf ]] || { echo "[format] error: clang-format-14 not found (package clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '/fixtures/')
if [[ ${1:-} == --fix ]]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf '[format] %d file(s) differ from clang-format (scripts/check-format.sh --fix rewrites them):\n' "${#bad[@]}"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "[format] ${#files[@]} files match clang-format"
