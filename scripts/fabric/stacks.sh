# Sourced by scripts/run.sh and scripts/osu.sh: the MPI stacks compared, how
# mpirun selects each, the layouts, and how ranks are launched on this host or
# across the emulated fabric. One definition, so every table compares the same
# things.
#
# The stacks (what a user compares):
#   plain     plain `mpirun`: Open MPI's defaults on this Debian, pml ob1 with
#             vader inside a host and tcp between hosts. Nothing is added but
#             what every stack gets (launch, interfaces on the fabric).
#   ucx       pml ucx with UCX_TLS=sm,tcp,self (shared memory inside a host,
#             tcp between hosts); pml_ucx_tls/pml_ucx_devices only open the
#             gate that keeps pml ucx off non-InfiniBand transports.
#   doorbell  `mpirun --tune install/share/doorbell/doorbell.tune`.
# By name, for the incast and for anyone who asks (tcp only, even inside a host):
#   ob1_tcp   pml ob1 with btl self,tcp
#   ucx_tcp   pml ucx with UCX_TLS=tcp,self
# By name, for one-sided MPI between hosts, which plain mpirun cannot run on
# Debian (/etc/openmpi/openmpi-mca-params.conf excludes osc ucx and pt2pt,
# and osc rdma finds no btl with atomics): what a user can select instead.
#   pt2pt_tcp osc pt2pt (one-sided as messages) over pml ob1, btl self,vader,tcp
#   ucx_osc   osc ucx over pml ucx with UCX_TLS=sm,tcp,self
#
# Functions: stacks_select LIST (checks names, sets `stacks`), layout_select
# (checks $layout, sets layout_up, layout_text, layout_ranks; both set
# stacks_error and return 1 on a bad name), stack_args
# <stack> (prints the mpirun arguments that select it), stack_label <stack>,
# stacks_env (summary lines for env.txt).
# Needs: $install (the install prefix), $fabric (0|1), $fabric_tool,
# $fabric_name, and on the fabric $layout (2x2 | 4x1). Sets as well:
# doorbell_state, doorbell_tune, coll_component, launch, common.

stacks_main=(plain ucx doorbell)
stacks_known=(plain ucx doorbell ob1_tcp ucx_tcp pt2pt_tcp ucx_osc doorbell_osc_rdma)
stacks=("${stacks_main[@]}")

doorbell_transport=$install/lib/ucx/libuct_doorbell.so
doorbell_tune=$install/share/doorbell/doorbell.tune
coll_component=$(find "$install" -name 'mca_coll_doorbell.so' 2>/dev/null | head -1 || true)
if [[ -f $doorbell_transport && -f $doorbell_tune ]]; then
  doorbell_state=present
elif [[ -f $doorbell_transport ]]; then
  doorbell_state="not built (no $doorbell_tune)"
else
  doorbell_state="not built"
fi

# stacks_select "plain,ucx,doorbell": 0, or 1 with stacks_error naming the bad one.
stacks_select() {
  local s k ok
  local -a want
  IFS=, read -r -a want <<<"$1"
  ((${#want[@]})) || { stacks_error="no stack named (known: ${stacks_known[*]})"; return 1; }
  for s in "${want[@]}"; do
    ok=0
    for k in "${stacks_known[@]}"; do [[ $s == "$k" ]] && ok=1; done
    ((ok)) || { stacks_error="unknown stack '$s' (known: ${stacks_known[*]})"; return 1; }
  done
  stacks=("${want[@]}")
}

# The layout: on this host 4 ranks; on the fabric hosts under both leaves, so
# that traffic between hosts crosses a spine. Ranks fill one host after the
# other (--map-by slot): ranks 0 and 3 are on different hosts either way.
layout_select() {
  layout_ranks=4
  if ((!fabric)); then
    layout_up=() layout_text="1 host x 4 ranks"
    return 0
  fi
  case ${layout:-2x2} in
    2x2) layout_up=(--leaves 2 --hosts-per-leaf 1 --ranks-per-host 2)
         layout_text="2 hosts x 2 ranks, one host per leaf" ;;
    4x1) layout_up=(--leaves 2 --hosts-per-leaf 2 --ranks-per-host 1)
         layout_text="4 hosts x 1 rank, two hosts per leaf" ;;
    2x3) layout_up=(--leaves 2 --hosts-per-leaf 1 --ranks-per-host 3) layout_ranks=6
         layout_text="2 hosts x 3 ranks, one host per leaf" ;;
    3x2) layout_up=(--leaves 3 --hosts-per-leaf 1 --ranks-per-host 2) layout_ranks=6
         layout_text="3 hosts x 2 ranks, one host per leaf" ;;
    *) stacks_error="unknown layout '$layout' (2x2, 4x1, 2x3 or 3x2)"; return 1 ;;
  esac
}

if ((fabric)); then
  # Hostfile, rsh agent, oob/btl tcp interfaces (198.18.0.0/15),
  # UCX_NET_DEVICES=fab0, no binding and yielding come from doorbell-fabric
  # run; shared memory works inside a host, and every host's ranks run on
  # its own CPUs (doorbell-fabric up --host-cpus spread).
  launch=("$fabric_tool" --name "$fabric_name" run --)
  stack_if=fab0
  stack_tcp_if=198.18.0.0/15
  common=(--map-by slot)
else
  launch=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun)
  # UCX's network devices: loopback only, so that no UCX stack takes this
  # machine's own NIC between ranks of one host.
  stack_if=lo
  stack_tcp_if=lo
  # More ranks than cores: waiting ranks must yield. Every stack's ranks are
  # bound to the cores in turn (4 ranks: 2 per core). Unbound, the scheduler
  # put them 2 + 2 or 3 + 1 from job to job, and a small allreduce took 12 or
  # 22 us by that alone, in every stack (docs/fabric.md).
  common=(--oversubscribe --bind-to core:overload-allowed --mca mpi_yield_when_idle 1)
fi

stack_args() {
  case $1 in
    plain) echo "" ;;
    ucx) echo "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any -x UCX_TLS=sm,tcp,self -x UCX_NET_DEVICES=$stack_if" ;;
    doorbell) echo "--tune $doorbell_tune -x UCX_NET_DEVICES=$stack_if" ;;
    # the tune file with windows across hosts on osc rdma (not osc pt2pt)
    doorbell_osc_rdma) echo "--tune $doorbell_tune -x UCX_NET_DEVICES=$stack_if --mca osc_doorbell_across_hosts rdma" ;;
    ob1_tcp) echo "--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include $stack_tcp_if" ;;
    ucx_tcp) echo "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ^ucx -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=$stack_if" ;;
    pt2pt_tcp) echo "--mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include $stack_tcp_if --mca osc pt2pt" ;;
    ucx_osc) echo "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ucx -x UCX_TLS=sm,tcp,self -x UCX_NET_DEVICES=$stack_if" ;;
    *) return 1 ;;
  esac
}

stack_label() {
  case $1 in
    plain) echo "plain mpirun" ;;
    ucx) echo "ucx sm,tcp" ;;
    doorbell) echo "doorbell" ;;
    doorbell_osc_rdma) echo "doorbell, osc rdma" ;;
    ob1_tcp) echo "ob1 / tcp" ;;
    ucx_tcp) echo "ucx / tcp" ;;
    pt2pt_tcp) echo "osc pt2pt, ob1 / tcp" ;;
    ucx_osc) echo "osc ucx, ucx sm,tcp" ;;
    *) echo "$1" ;;
  esac
}

# Summary lines for env.txt: state and mpirun arguments of every stack run.
stacks_env() {
  local s args
  echo "stacks=$(IFS=,; echo "${stacks[*]}")"
  echo "doorbell=$doorbell_state"
  echo "doorbell_coll=${coll_component:-not built}"
  for s in "${stacks[@]}"; do
    args=$(stack_args "$s")
    [[ -n $args ]] || args="(none: Open MPI's defaults)"
    echo "args.$s: $args"
  done
  if [[ -f $doorbell_tune ]]; then
    grep -v '^#' "$doorbell_tune" | grep . | sed 's/^/tune: /'
  fi
}
