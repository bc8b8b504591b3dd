# Sourced by scripts/run.sh, scripts/osu.sh and scripts/fabric/incast.sh: the
# MPI stacks compared, how mpirun selects each, and how ranks are launched on
# this host or across the emulated fabric.
#
# Needs: $install (the install prefix), $fabric (0|1), $fabric_tool,
# $fabric_name, and on the fabric $layout (2x2 | 4x1). Sets: stacks,
# doorbell_state, coll_component, launch, common, layout_up (the fabric's
# `up` options), layout_text, and stack_args <stack> (prints the mpirun
# arguments that select it).

stacks=(ob1_tcp ucx_tcp doorbell)
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

if ((fabric)); then
  # Hosts under both leaves, so that traffic between hosts crosses a spine;
  # the ranks fill one host after the other (ranks 0 and 3 on different
  # hosts either way).
  case ${layout:-2x2} in
    2x2) layout_up=(--leaves 2 --hosts-per-leaf 1 --ranks-per-host 2)
         layout_text="2 hosts x 2 ranks, one host per leaf" ;;
    4x1) layout_up=(--leaves 2 --hosts-per-leaf 2 --ranks-per-host 1)
         layout_text="4 hosts x 1 rank, two hosts per leaf" ;;
    *) echo "unknown layout '$layout' (2x2 or 4x1)" >&2; exit 1 ;;
  esac
  # Hostfile, rsh agent, oob/btl interfaces, no binding and yielding come
  # from doorbell-fabric run; shared memory works inside a host.
  launch=("$fabric_tool" --name "$fabric_name" run --)
  stack_if=fab0
  stack_tcp_if=198.18.0.0/15
  common=(--map-by slot)
else
  launch=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun)
  stack_if=lo
  stack_tcp_if=lo
  # More ranks than cores: waiting ranks must yield.
  common=(--oversubscribe --mca mpi_yield_when_idle 1)
fi

stack_args() {
  case $1 in
    ob1_tcp) echo "--mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include $stack_tcp_if" ;;
    ucx_tcp) echo "--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ^ucx -x UCX_TLS=tcp,self -x UCX_NET_DEVICES=$stack_if" ;;
    doorbell) echo "--tune $doorbell_tune -x UCX_NET_DEVICES=$stack_if" ;;
    *) return 1 ;;
  esac
}

# A summary line per stack for env.txt.
stacks_env() {
  echo "doorbell=$doorbell_state"
  echo "doorbell_coll=${coll_component:-not built}"
}
