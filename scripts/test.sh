#!/usr/bin/env bash
# Every test: sets up as needed, checks the layout of the sources
# (scripts/check-format.sh), then the main build's tests (all labels), the
# ASan/UBSan build of the unit tests and the TSan build of the lock-free rings.
# The sanitized builds hold the core and its tests only (DOORBELL_ADAPTERS is
# OFF there): the UCX/Open MPI adapters run in the main build's integration
# tests.
#   scripts/test.sh              everything
#   scripts/test.sh -L unit      only a label of the main build (passed to ctest)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${DOORBELL_BUILD_DIR:-build}
log() { printf '[test] %s\n' "$*"; }
jobs=$(nproc)
fail=0
t0=$SECONDS
phase() { log "$1 done in $((SECONDS - t0)) s"; t0=$SECONDS; }

bash scripts/setup.sh || { log "set-up failed"; exit 1; }
phase "set-up"

if [[ $# == 0 ]]; then
  bash scripts/check-format.sh || fail=1
fi

log "main build: ctest $*"
(cd "$build" && ctest --output-on-failure -j "$jobs" "$@") || fail=1
phase "main build tests"

if [[ $# == 0 ]]; then
  log "ASan/UBSan build of the unit tests"
  cmake -S . -B build-asan -G Ninja -DDOORBELL_SANITIZE="address;undefined" \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
  if cmake --build build-asan -j "$jobs"; then
    (cd build-asan && ctest --output-on-failure -j "$jobs" -L unit) || fail=1
  else
    log "ASan/UBSan build failed"; fail=1
  fi
  phase "ASan/UBSan"

  log "TSan build of the lock-free rings"
  cmake -S . -B build-tsan -G Ninja -DDOORBELL_SANITIZE=thread \
    -DCMAKE_BUILD_TYPE=Debug >/dev/null
  if cmake --build build-tsan -j "$jobs" --target doorbell_tsan_tests; then
    (cd build-tsan && ctest --output-on-failure -j "$jobs" -L tsan) || fail=1
  else
    log "TSan build failed"; fail=1
  fi
  phase "TSan"
fi
((fail == 0)) && log "all tests passed" || log "FAILED"
exit $fail
