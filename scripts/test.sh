#!/usr/bin/env bash
# Every test: sets up as needed, then the main build's tests (all labels), the
# ASan/UBSan build of the unit tests and the TSan build of the lock-free rings.
#   scripts/test.sh              everything
#   scripts/test.sh -L unit      only a label (passed to ctest)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { printf '[test] %s\n' "$*"; }

bash scripts/setup.sh
jobs=$(nproc)
fail=0

log "main build: ctest $*"
(cd build && ctest --output-on-failure -j "$jobs" "$@") || fail=1

if [[ $# == 0 ]]; then
  log "ASan/UBSan build of the unit tests"
  cmake -S . -B build-asan -G Ninja -DDOORBELL_SANITIZE="address;undefined" -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build build-asan -j "$jobs"
  (cd build-asan && ctest --output-on-failure -j "$jobs" -L unit) || fail=1

  log "TSan build of the lock-free rings"
  cmake -S . -B build-tsan -G Ninja -DDOORBELL_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build build-tsan -j "$jobs" --target doorbell_tsan_tests
  (cd build-tsan && ctest --output-on-failure -j "$jobs" -L tsan) || fail=1
fi
exit $fail
