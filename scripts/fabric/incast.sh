#!/usr/bin/env bash
# The pacing experiment: incast across the spine into a shallow buffer.
#
# Three senders (h1, h2, h3 under leaf 1) stream to one receiver (h4 under
# leaf 2) through a single spine; the leaf-1 uplink (200 Mb/s, 64 KiB buffer,
# ECN K 20 KiB) is the bottleneck. Each sender is a ucx_perftest UCP tag_bw
# client of its own server on h4, waiting on the worker's wake-up fd
# (`-I -E sleep`): six polling processes on two cores would take the CPU
# from the very senders the pacer schedules. Modes:
#   ibrc   doorbell transport, UCX_DOORBELL_CC=ibrc (closed-loop pacing)
#   dcqcn, timely  doorbell transport with the other built-in controllers
#   none   doorbell transport, UCX_DOORBELL_CC=none (unpaced)
#   tcp    UCX tcp (the kernel's TCP congestion control), a reference
# Per mode: goodput (and its share of the bottleneck rate), retransmit % and
# CE marks from the doorbell counter dump (UCX_DOORBELL_STATS=y), drops and
# marks at the bottleneck port (tbf and the BPF marker), and the RTT p50/p99
# of 200-Hz ping probes h1 -> h4 sharing the bottleneck queue.
# The hosts run on every CPU (--host-cpus shared): with the fabric's default
# the three senders would take turns on one CPU, where real senders each have
# their own machine, and the CE marks doubled (docs/fabric.md).
#
#   scripts/fabric/incast.sh [--modes ibrc,none,tcp] [--mib-per-sender N]
#                            [--msg BYTES] [--out DIR] [--json FILE] [--name FABRIC]
#                            [--spine-rate R] [--buffer B] [--ecn-k B]
#                            [--mtu N] [--host-cpus spread|shared]
#                            [--timeout S]  (per mode, default 120)
#
# Needs root, doorbell-fabric, ucx_perftest (ucx-utils), ping; for the ibrc
# and none modes install/lib/ucx/libuct_doorbell.so with UCX_DOORBELL_CC and
# UCX_DOORBELL_STATS (a mode whose transport is absent is reported "not built").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
log() { printf '[incast] %s\n' "$*" >&2; }
die() { printf '[incast] error: %s\n' "$*" >&2; exit 1; }

modes=ibrc,none,tcp mib=24 msg=65536 out="" json="" name=dbinc limit=120
rate=200mbit buffer=64k ecn_k=20k mtu=1500 host_cpus=shared
while (($#)); do
  case $1 in
    --modes) modes=$2; shift 2 ;;
    --mib-per-sender) mib=$2; shift 2 ;;
    --msg) msg=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --spine-rate) rate=$2; shift 2 ;;
    --buffer) buffer=$2; shift 2 ;;
    --ecn-k) ecn_k=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --host-cpus) host_cpus=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $(id -u) == 0 ]] || die "needs root (network namespaces)"
command -v ucx_perftest >/dev/null || die "ucx_perftest not found (apt-get install ucx-utils)"
command -v ping >/dev/null || die "ping not found (apt-get install iputils-ping)"
[[ $mib =~ ^[0-9]+$ && $msg =~ ^[0-9]+$ && $msg -gt 0 ]] || die "--mib-per-sender and --msg must be positive integers"

install=${DOORBELL_INSTALL:-$root/install}
fabric_tool=$install/bin/doorbell-fabric
[[ -x $fabric_tool ]] || fabric_tool=$root/scripts/bin/doorbell-fabric
transport=$install/lib/ucx/libuct_doorbell.so
F=("$fabric_tool" --name "$name")
out=${out:-results/incast-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
iters=$(((mib << 20) / msg))
((iters >= 1)) || die "--mib-per-sender too small for --msg"

# Bring the fabric up: 2 leaves x 3 hosts, one spine.
cleanup() { "${F[@]}" -q down || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"${F[@]}" up --leaves 2 --hosts-per-leaf 3 --spines 1 --spine-rate "$rate" --buffer "$buffer" --ecn-k "$ecn_k" --mtu "$mtu" --host-cpus "$host_cpus" >&2
mapfile -t hosts < <("${F[@]}" hosts)
receiver=${hosts[3]}
rate_bps=$(awk '/^SPINE_BPS=/{split($0,a,"="); print a[2]}' "${DOORBELL_FABRIC_STATE:-/run/doorbell-fabric}/$name/config")

port_counters() {   # "drop marked sent_bytes" of the bottleneck port (leaf 1 -> spine 1)
  "${F[@]}" status 2>/dev/null | awk -v ns="$name-l1" '$1 == ns && $2 == "s1" {
    d = 0; m = 0; b = 0
    for (i = 1; i <= NF; i++) {
      if ($i ~ /^drop=/) d = substr($i, 6); if ($i ~ /^marked=/) m = substr($i, 8)
      if ($i ~ /^[0-9]+B$/) b = substr($i, 1, length($i) - 1)
    }
    print d, m, b }'
}

tcp_counters() {   # "OutSegs RetransSegs" summed over the senders (kernel TCP)
  local s o=0 r=0 a b
  for s in 1 2 3; do
    read -r a b < <("${F[@]}" exec "h$s" -- awk '/^Tcp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["OutSegs"], $c["RetransSegs"] }' /proc/net/snmp)
    o=$((o + a)); r=$((r + b))
  done
  echo "$o $r"
}

run_mode() {   # mode -> writes $out/<mode>.* and a line to $out/modes.txt
  local mode=$1 env_extra=()
  case $mode in
    ibrc|none|dcqcn|timely)
      if [[ ! -f $transport ]]; then
        log "$mode: not built ($transport is absent)"
        echo "$mode not_built" >> "$out/modes.txt"
        return
      fi
      env_extra=(LD_PRELOAD="$transport" UCX_TLS=doorbell,self UCX_DOORBELL_CC="$mode" UCX_DOORBELL_STATS=y ${INCAST_ENV:-}) ;;
    tcp) env_extra=(UCX_TLS=tcp,self) ;;
    *) die "unknown mode '$mode' (ibrc, dcqcn, timely, none, tcp)" ;;
  esac
  log "$mode: 3 senders x $mib MiB in $msg-byte messages -> $receiver"
  read -r drop0 mark0 sent0 < <(port_counters)
  read -r segs0 retr0 < <(tcp_counters)
  local pids=() s port
  for s in 1 2 3; do
    port=$((13500 + s))
    "${F[@]}" exec h4 -- env "${env_extra[@]}" UCX_NET_DEVICES=fab0 \
      timeout "$limit" ucx_perftest -p "$port" -I -E sleep > "$out/$mode.server$s.txt" 2>&1 &
    pids+=($!)
  done
  # Servers listen before clients connect: wait for their ports (bounded).
  local tries=0
  while (( $("${F[@]}" exec h4 -- ss -Hltn 2>/dev/null | grep -cE ':1350[123] ') < 3 )); do
    ((++tries < 100)) || die "$mode: ucx_perftest servers did not start (see $out/$mode.server*.txt)"
    sleep 0.1
  done
  # The probe needs h1's network only; started there directly, it is the
  # process whose pid we hold and interrupt (exec's command would be a child).
  ip netns exec "$name-h1" ping -n -i 0.005 -w "$limit" "$receiver" > "$out/$mode.ping.txt" 2>&1 &
  local ping_pid=$!
  # The bottleneck port's byte counter every 5 ms: the report finds the
  # transfer in it (connection set-up and teardown are not the pacer's).
  rm -f "$out/$mode.port.txt"
  ip netns exec "$name-l1" python3 -c '
import sys, time
f = open("/sys/class/net/s1/statistics/tx_bytes")
while True:
    f.seek(0)
    print("%.6f %s" % (time.monotonic(), f.read().strip()), flush=True)
    time.sleep(0.005)' > "$out/$mode.port.txt" 2>/dev/null &
  local sampler_pid=$!
  tries=0
  until [[ -s $out/$mode.port.txt ]]; do   # its first sample: the baseline
    ((++tries < 100)) || die "$mode: the port sampler did not start"
    sleep 0.05
  done
  local t0 t1; t0=$(date +%s.%N)
  local cpids=()
  for s in 1 2 3; do
    "${F[@]}" exec "h$s" -- env "${env_extra[@]}" UCX_NET_DEVICES=fab0 \
      timeout "$limit" ucx_perftest "$receiver" -p $((13500 + s)) -t tag_bw -s "$msg" -n "$iters" -w 2 -f -I -E sleep \
      > "$out/$mode.client$s.txt" 2>&1 &
    cpids+=($!)
  done
  local ok=1
  for p in "${cpids[@]}"; do wait "$p" || ok=0; done
  t1=$(date +%s.%N)
  kill -INT "$ping_pid" 2>/dev/null || true
  wait "$ping_pid" 2>/dev/null || true
  kill "$sampler_pid" 2>/dev/null || true
  wait "$sampler_pid" 2>/dev/null || true
  for p in "${pids[@]}"; do wait "$p" || ok=0; done
  read -r drop1 mark1 sent1 < <(port_counters)
  read -r segs1 retr1 < <(tcp_counters)
  echo "$mode ran ok=$ok seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') bytes=$((3 * iters * msg))" \
    "port_drops=$((drop1 - drop0)) port_marks=$((mark1 - mark0)) port_bytes=$((sent1 - sent0)) tcp_segs=$((segs1 - segs0)) tcp_retrans=$((retr1 - retr0))" >> "$out/modes.txt"
  ((ok)) || log "$mode: a sender or receiver failed (see $out/$mode.*.txt)"
}

: > "$out/modes.txt"
IFS=, read -r -a mode_list <<<"$modes"
for m in "${mode_list[@]}"; do run_mode "$m"; done

py=/usr/bin/python3
[[ -x $py ]] || py=python3
"$py" "$root/scripts/report/incast_report.py" "$out" "$rate_bps" ${json:+--json "$json"}
log "results in $out"
