#!/usr/bin/env bash
# GPU check: builds the GPU targets, runs every test labelled gpu (plus the
# ring protocol's unit tests and the IBGDA tests against the fake verbs
# provider, whose kernel variant maps the fake's mlx5 queues into the GPU),
# then the put rate/latency benchmark -- GPU-initiated vs CPU-proxy vs
# CPU-posted in one run -- and the MPI sample, and prints one table. Meant for a machine with an NVIDIA GPU (sm_80/sm_90) and
# CUDA at /usr/local/cuda; about 2-4 minutes including the build.
#   scripts/gpu-check.sh              build into build-gpu/, run, print
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
