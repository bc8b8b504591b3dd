/*
 * The pacing policies by name: the one list the pacing library
 * (pacing::Policy, parse_policy, policy_name), the simulator's comparison
 * and the UCX transport's UCX_DOORBELL_CC values are made from. A new
 * controller is one line here, and its class behind pacer.h.
 *
 * DOORBELL_PACING_POLICIES(_) calls _(UPPER, Camel, "name") per policy a
 * device runs behind its pacing gate (pacing_gate.h). Plain C: the UCX
 * adapter builds its enum and name table from it.
 */
#ifndef DOORBELL_PACING_POLICIES_H
#define DOORBELL_PACING_POLICIES_H

#define DOORBELL_PACING_POLICIES(_) \
    _(IBRC, Ibrc, "ibrc")           \
    _(DCQCN, Dcqcn, "dcqcn")        \
    _(TIMELY, Timely, "timely")     \
    _(NONE, None, "none")

/*
 * Policies the simulator (doorbell-sim) runs and no device does, so neither
 * the UCX enum nor a gate offers them:
 * - hpcc: its law reads the switches' in-band telemetry (INT records of
 *   queue, bytes sent, time and rate per hop) from every ACK; no device
 *   receives INT (a host stack's UDP, or a RoCE NIC without INT support).
 * - swift: a window law whose delay splits into a fabric and an endpoint
 *   part; the gate carries neither a window nor the endpoint delay.
 */
#define DOORBELL_PACING_SIM_POLICIES(_) \
    _(HPCC, Hpcc, "hpcc")               \
    _(SWIFT, Swift, "swift")

/* Every policy: a device's, then the simulator's. */
#define DOORBELL_PACING_ALL_POLICIES(_) \
    DOORBELL_PACING_POLICIES(_)         \
    DOORBELL_PACING_SIM_POLICIES(_)

/* Not a policy: what a device resolves per iface (ibrc, but none on a
 * loopback device; pacing::resolve_pacing_policy). */
#define DOORBELL_PACING_AUTO "auto"

#endif /* DOORBELL_PACING_POLICIES_H */
