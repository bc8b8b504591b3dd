#!/usr/bin/env bash
# GPU check: builds the GPU targets, runs every test labelled gpu (plus the
# ring protocol's unit tests and the IBGDA tests against the fake verbs
# provider, whose kernel variant maps the fake's mlx5 queues into the GPU),
# then the put rate/latency benchmark -- GPU-initiated vs CPU-proxy vs
# CPU-posted in one run -- and the MPI sample, and prints one table. Meant for
# a machine with an NVIDIA GPU (sm_80/sm_90) and CUDA at /usr/local/cuda;
# about 2-4 minutes including the build.
#   scripts/gpu-check.sh              build into build-gpu/, run, print
#   scripts/gpu-check.sh --pack DIR   build here, then copy the GPU test and
#                                     benchmark binaries (stripped) with the
#                                     shared libraries they need beyond glibc
#                                     and libstdc++ into DIR, plus this script
#   scripts/gpu-check.sh --packed DIR run a pack on a GPU node that has the
#                                     driver but not the build's packages
#                                     (no gtest, UCX, verbs or MPI there):
#                                     every test binary, compute-sanitizer's
#                                     memcheck on the kernel tests when it is
#                                     installed, then the benchmark
#   DOORBELL_BUILD_DIR=dir            another build folder
#   GPU_CHECK_PUTS=N GPU_CHECK_BYTES=B   benchmark size (default 20000, 8)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${DOORBELL_BUILD_DIR:-build-gpu}
puts=${GPU_CHECK_PUTS:-20000}
bytes=${GPU_CHECK_BYTES:-8}
log() { printf '[gpu-check] %s\n' "$*"; }
start=$(date +%s)

# Test binaries and the benchmark, relative to the build folder.
pack_tests=(tests/gpu/ring/gpu_ring_test tests/gpu/ring/gpu_engine_test
            tests/gpu/gpu_mlx5_test tests/gpu/gpu_udp_test tests/gpu/gpu_kernel_test
            tests/gpu/gpu_udp_kernel_test tests/verbs/gpu_ibgda_test
            tests/verbs/gpu_ibgda_kernel_test)
pack_kernel_tests=(gpu_kernel_test gpu_udp_kernel_test gpu_ibgda_kernel_test)
pack_bench=ucx_tl/gpu/doorbell-gpu-bench
pack_sample=ucx_tl/gpu/doorbell-gpu-sample

if [[ ${1:-} == --pack ]]; then
  dir=${2:?"usage: $0 --pack DIR"}
  build=${DOORBELL_BUILD_DIR:-build}
  [[ -f $build/CMakeCache.txt ]] || { log "error: no configured build in $build (run scripts/setup.sh first)"; exit 1; }
  cmake --build "$build" -j "$(nproc)" --target "${pack_tests[@]##*/}" "${pack_bench##*/}" ||
    { log "error: the GPU targets did not build in $build (configured without CUDA? see scripts/setup.sh)"; exit 1; }
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib"
  # pack_binary <binary> [<more libraries to leave behind>]: the stripped
  # binary and the libraries glibc and the compiler runtime do not provide
  # (the GPU node has its own glibc/libstdc++, newer or equal, but none of
  # the build's packages).
  pack_binary() {
    local skip='libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*'
    strip --strip-debug -o "$dir/bin/${1##*/}" "$1"
    ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
      grep -v -E "/(${skip}${2:+|$2})\\.so" |
      while read -r lib; do cp -L -n "$lib" "$dir/lib/"; done || true
  }
  for f in "${pack_tests[@]}" "$pack_bench"; do
    [[ -x $build/$f ]] || { log "error: $build/$f was not built"; exit 1; }
    pack_binary "$build/$f"
  done
  # The MPI sample uses the node's own Open MPI (its mpirun and libmpi.so.40
  # must match each other), so only its non-MPI libraries travel.
  if cmake --build "$build" --target "${pack_sample##*/}" >/dev/null 2>&1; then
    pack_binary "$build/$pack_sample" 'libmpi|libopen-rte|libopen-pal|libhwloc|libevent[^/]*|libudev|libz'
  else
    log "the MPI sample is not configured here (no MPI): not packed"
  fi
  cp "$0" "$dir/gpu-check.sh"
  log "packed into $dir: $(du -sh "$dir" | cut -f1) ($(ls "$dir/bin" | wc -l) binaries, libraries: $(ls "$dir/lib" | tr '\n' ' '))"
  exit 0
fi

if [[ ${1:-} == --packed ]]; then
  dir=$(cd "${2:?"usage: $0 --packed DIR"}" && pwd)
  export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  out=${GPU_CHECK_OUT:-$dir}
  nvidia-smi -L 2>/dev/null | sed 's/^/[gpu-check] /' || log "warning: nvidia-smi finds no GPU"
  summary=()
  rc=0
  set +e
  for f in "${pack_tests[@]}"; do
    t=${f##*/}
    log "test $t"
    timeout 90 "$dir/bin/$t" --gtest_brief=1 >"$out/$t.log" 2>&1
    trc=$?
    grep -E '^\[  (FAILED|SKIPPED) \]|Failure|error' "$out/$t.log" | head -n 20
    [[ $trc == 0 ]] || { log "$t exited with $trc; its last lines:"; tail -n 8 "$out/$t.log"; }
    pass=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out/$t.log")
    skip=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$out/$t.log")
    fail=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out/$t.log")
    summary+=("$(printf '%-24s rc=%-3s passed=%-4s skipped=%-3s failed=%s' "$t" "$trc" "${pass:-0}" "${skip:-0}" "${fail:-0}")")
    [[ $trc == 0 ]] || rc=1
  done
  log "benchmark"
  timeout 150 "$dir/bin/doorbell-gpu-bench" --puts "$puts" --bytes "$bytes" >"$out/bench.log" 2>&1
  brc=$?
  [[ $brc == 0 ]] || rc=1
  # memcheck last: it slows the spinning kernels by orders of magnitude.
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [[ -n $sanitizer ]]; then
    for t in "${pack_kernel_tests[@]}"; do
      log "compute-sanitizer memcheck: $t"
      timeout 60 "$sanitizer" --tool memcheck --error-exitcode 7 --print-limit 20 \
        "$dir/bin/$t" --gtest_brief=1 >"$out/$t.memcheck.log" 2>&1
      trc=$?
      grep -E 'ERROR SUMMARY|Invalid|PASSED|FAILED|SKIPPED' "$out/$t.memcheck.log" | head -n 12
      summary+=("$(printf '%-24s memcheck rc=%s  %s' "$t" "$trc" "$(grep -m1 'ERROR SUMMARY' "$out/$t.memcheck.log")")")
      [[ $trc == 0 ]] || rc=1
    done
  else
    summary+=("compute-sanitizer: not installed, memcheck not run")
  fi
  sample_out="(not packed, or no mpirun here)"
  if [[ -x $dir/bin/${pack_sample##*/} ]] && command -v mpirun >/dev/null; then
    log "sample: mpirun -np 2 ${pack_sample##*/} 65536 100"
    sample_out=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 \
                 -x LD_LIBRARY_PATH "$dir/bin/${pack_sample##*/}" 65536 100 2>&1 | tail -n 6)
    src=$?  # the pipeline's status: pipefail is set
    [[ $src == 0 ]] || { rc=1; sample_out+=" (exit $src)"; }
  fi
  set -e
  echo
  echo "================ doorbell GPU check, packed ($(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - start )) s) ================"
  echo "GPU:     $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1 || echo none)"
  printf '%s\n' "${summary[@]}"
  echo
  cat "$out/bench.log"
  echo "bench rc=$brc"
  echo
  echo "sample (mpirun -np 2):"
  echo "$sample_out"
  echo "========================================================================================="
  exit $rc
fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  log "warning: nvidia-smi finds no GPU; the gpu tests will report SKIPPED with the reason"
else
  nvidia-smi -L | sed 's/^/[gpu-check] /'
fi

log "configure + build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
grep -q '^DOORBELL_HAVE_MLX5DV:INTERNAL=ON' "$build/CMakeCache.txt" && log "mlx5dv: found at build time" || log "mlx5dv: not found at build time"
targets=(gpu_ring_test gpu_engine_test gpu_mlx5_test gpu_udp_test gpu_kernel_test
         gpu_udp_kernel_test gpu_ibgda_test gpu_ibgda_kernel_test
         doorbell-gpu-bench doorbell-gpu-sample)
have=()
for t in "${targets[@]}"; do
  ninja -C "$build" -t query "$t" >/dev/null 2>&1 && have+=("$t") || log "not configured here: $t (CUDA, MPI or the core missing)"
done
cmake --build "$build" -j "$(nproc)" --target "${have[@]}"

log "tests: -L gpu, and the ring protocol (-R gpu_)"
set +e
(cd "$build" && ctest --output-on-failure -R '^(kinds/)?gpu_' 2>&1) | tee "$build/gpu-check-ctest.log" | grep -E 'Test +#|tests passed|Skipped|SKIPPED|no GPU'
tests_rc=${PIPESTATUS[0]}
skipped=$(grep -c '(Skipped)' "$build/gpu-check-ctest.log")

log "benchmark"
bench_out=$(timeout 150 "$build/ucx_tl/gpu/doorbell-gpu-bench" --puts "$puts" --bytes "$bytes" 2>&1)
bench_rc=$?
sample_out="(not built)"
if [[ -x $build/ucx_tl/gpu/doorbell-gpu-sample ]] && command -v mpirun >/dev/null; then
  sample_out=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 \
               "$build/ucx_tl/gpu/doorbell-gpu-sample" 65536 100 2>&1 | tail -n 4)
fi
set -e

echo
echo "================ doorbell GPU check ($(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - start )) s) ================"
echo "GPU:     $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1 || echo none)"
echo "RDMA:    $( (ibv_devinfo -l 2>/dev/null | sed -n '2,$p' | tr -s ' \n' ' ') || true) (IBGDA on a NIC needs an mlx5 device and a peer; not part of this check)"
echo "tests:   $(grep -E 'tests passed' "$build/gpu-check-ctest.log" || echo 'ctest did not run'); skipped: $skipped"
echo
echo "$bench_out"
echo
echo "sample (mpirun -np 2):"
echo "$sample_out"
echo "=========================================================================================="
[[ $tests_rc == 0 && $bench_rc == 0 ]]
