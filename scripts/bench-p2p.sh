#!/usr/bin/env bash
# Point-to-point benchmark on lo (a benchmark, not a test: it prints numbers).
# One run measures, side by side:
#   - a raw UDP ping-pong (busy-polling): the floor of the doorbell UDP path;
#   - ucx_perftest UCP tag latency (8 B) and bandwidth (1 MiB) over UCX tcp
#     and over doorbell;
# and prints their ratios against the targets (latency <= 0.85x tcp and
# <= 1.15x the UDP floor; bandwidth >= 1.1x tcp).
#   scripts/bench-p2p.sh                 default iteration counts
#   BENCH_LAT_ITERS=N BENCH_BW_ITERS=N   override them
#   BENCH_REPEAT=N                       rounds (every stack once per round);
#                                        each figure is the best over rounds
#   DOORBELL_PREFIX=dir                  installation to use (default ./install)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${DOORBELL_PREFIX:-$root/install}
module=$prefix/lib/ucx/libuct_doorbell.so
pingpong=$prefix/bin/doorbell-udp-pingpong
lat_iters=${BENCH_LAT_ITERS:-10000}
# 1 MiB messages: enough of them that one descheduling of a process on a
# busy host does not decide the figure (100 took 20-100 ms and swung 3x)
bw_iters=${BENCH_BW_ITERS:-500}
repeat=${BENCH_REPEAT:-3}
log() { printf '[bench-p2p] %s\n' "$*" >&2; }
die() { printf '[bench-p2p] error: %s\n' "$*" >&2; exit 1; }

if [[ ! -f $module || ! -x $pingpong ]]; then
  [[ -z ${DOORBELL_PREFIX:-} ]] || die "$module or $pingpong missing in $prefix"
  log "no installation yet: running scripts/setup.sh"
  bash "$root/scripts/setup.sh" >&2
fi
command -v ucx_perftest >/dev/null || die "ucx_perftest not found (package ucx-utils)"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# perftest <label> <env...> -- <ucx_perftest test args...>
# Prints the final result line's fields: iterations, latency median/avg/overall
# (us), bandwidth avg/overall (MB/s), message rate avg/overall.
perftest() {
  local env=() args=() port server out rc attempt
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  args=("$@")
  port=$(free_port)
  env "${env[@]}" ucx_perftest -p "$port" >/dev/null 2>&1 &
  server=$!
  # The server may not listen yet: retry while the connect is refused.
  for attempt in $(seq 1 500); do
    rc=0
    out=$(env "${env[@]}" timeout 120 ucx_perftest 127.0.0.1 -p "$port" -f "${args[@]}" 2>&1) || rc=$?
    [[ $rc == 0 ]] && break
    grep -q "Connection refused" <<<"$out" && kill -0 "$server" 2>/dev/null || break
  done
  wait "$server" || true
  [[ $rc == 0 ]] || { printf '%s\n' "$out" >&2; die "ucx_perftest ${args[*]} failed"; }
  tail -n1 <<<"$out"
}

# best <current> <min|max> <field> <command...>: runs the command once and
# prints the better of current and the given whitespace-separated field.
best() {
  local cur=$1 mode=$2 field=$3 v
  shift 3
  v=$("$@" | awk -v f="$field" '{print $f}')
  if [[ -z $cur ]] || awk -v a="$v" -v b="$cur" -v m="$mode" \
       'BEGIN{exit !((m=="min" && a<b) || (m=="max" && a>b))}'; then
    cur=$v
  fi
  printf '%s\n' "$cur"
}

udp() { "$pingpong" "$lat_iters" 8 | awk '{print "x " $NF}'; }
tcp_env=(UCX_TLS=tcp UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n)
db_env=(LD_PRELOAD="$module" UCX_TLS=doorbell,self UCX_NET_DEVICES=lo UCX_WARN_UNUSED_ENV_VARS=n)
lat() { perftest "$@" -- -t tag_lat -s 8 -n "$lat_iters" -w 1000; }
bw()  { perftest "$@" -- -t tag_bw -s 1048576 -n "$bw_iters" -w 20; }

load_before=$(cut -d' ' -f1 /proc/loadavg)
# The stacks take turns within each round, so that a burst of load on a
# shared host hits all of them rather than the one measured at that moment.
udp_lat="" tcp_lat="" db_lat="" tcp_bw="" db_bw=""
for round in $(seq 1 "$repeat"); do
  log "round $round of $repeat: raw UDP ping-pong (8 B, $lat_iters round trips), then tcp and doorbell"
  udp_lat=$(best "$udp_lat" min 2 udp)
  tcp_lat=$(best "$tcp_lat" min 2 lat "${tcp_env[@]}")
  db_lat=$(best "$db_lat" min 2 lat "${db_env[@]}")
  tcp_bw=$(best "$tcp_bw" max 6 bw "${tcp_env[@]}")
  db_bw=$(best "$db_bw" max 6 bw "${db_env[@]}")
done

load_after=$(cut -d' ' -f1 /proc/loadavg)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", a / b}'; }
verdict() { awk -v r="$1" -v t="$2" -v m="$3" 'BEGIN{print ((m=="le" && r<=t) || (m=="ge" && r>=t)) ? "met" : "missed"}'; }
lat_vs_tcp=$(ratio "$db_lat" "$tcp_lat")
lat_vs_udp=$(ratio "$db_lat" "$udp_lat")
bw_vs_tcp=$(ratio "$db_bw" "$tcp_bw")

printf '\n%-34s %18s %22s\n' "path (lo)" "latency 8 B (us)" "bandwidth 1 MiB (MB/s)"
printf '%-34s %18.2f %22s\n' "raw UDP ping-pong (floor)" "$udp_lat" "-"
printf '%-34s %18.2f %22.0f\n' "UCP tag over UCX tcp" "$tcp_lat" "$tcp_bw"
printf '%-34s %18.2f %22.0f\n' "UCP tag over doorbell" "$db_lat" "$db_bw"
printf '%-34s %18s %22s\n' "doorbell / tcp" "${lat_vs_tcp}x" "${bw_vs_tcp}x"
printf '%-34s %18s %22s\n' "doorbell / UDP floor" "${lat_vs_udp}x" "-"
printf '\ntargets: latency <= 0.85x tcp (%s), <= 1.15x UDP floor (%s); bandwidth >= 1.1x tcp (%s)\n' \
  "$(verdict "$lat_vs_tcp" 0.85 le)" "$(verdict "$lat_vs_udp" 1.15 le)" "$(verdict "$bw_vs_tcp" 1.1 ge)"
printf 'latency: median one-way (ucx_perftest 50th percentile; UDP: median RTT/2), best of %s runs\n' "$repeat"
printf 'bandwidth: %s messages of 1 MiB per run, best of %s runs; load average %s before, %s after (%s cores)\n' \
  "$bw_iters" "$repeat" "$load_before" "$load_after" "$(nproc)"
