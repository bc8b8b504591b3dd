/*
 * The pacing policies by name: the one list the pacing library
 * (pacing::Policy, parse_policy, policy_name), the simulator's comparison
 * and the UCX transport's UCX_DOORBELL_CC values are made from. A new
 * controller is one line here, and its class behind pacer.h.
 *
 * DOORBELL_PACING_POLICIES(_) calls _(UPPER, Camel, "name") per policy.
 * Plain C: the UCX adapter builds its enum and name table from it.
 */
#ifndef DOORBELL_PACING_POLICIES_H
#define DOORBELL_PACING_POLICIES_H

#define DOORBELL_PACING_POLICIES(_) \
    _(IBRC, Ibrc, "ibrc")           \
    _(DCQCN, Dcqcn, "dcqcn")        \
    _(TIMELY, Timely, "timely")     \
    _(NONE, None, "none")

/* Not a policy: what a device resolves per iface (ibrc, but none on a
 * loopback device; pacing::resolve_pacing_policy). */
#define DOORBELL_PACING_AUTO "auto"

#endif /* DOORBELL_PACING_POLICIES_H */
