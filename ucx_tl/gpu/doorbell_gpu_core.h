/*
 * GPU queues on the core's devices: an engine that owns a doorbell iface
 * (its thread progresses the iface; completions and QP errors of the iface
 * come to it) and queues whose batches go to a doorbell_qp_t with
 * doorbell_qp_post.
 *
 * UCT/UCP endpoints: a UCT endpoint of the doorbell transport is a core QP
 * created from the peer's device and iface addresses (CONNECT_TO_IFACE).
 * doorbell_gpu_queue_create_for_peer() takes exactly those bytes -- what
 * uct_iface_get_device_address()/uct_iface_get_address() return on the
 * peer, or the doorbell entry of a UCP worker address -- and creates the
 * QP and its queue on the engine's iface. It does not reach into an
 * existing uct_ep_h (that needs the UCT module's internals): the GPU queue
 * is a QP of its own beside the endpoint, to the same peer iface. Remote
 * keys are the core's 32-bit keys (doorbell_mr_register on the peer).
 */
#ifndef DOORBELL_GPU_CORE_H
#define DOORBELL_GPU_CORE_H

#include "doorbell_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An engine for iface (opened on `device`, a name from
 * doorbell_query_devices). Installs the iface's completion and error
 * handlers; the caller must not progress the iface itself while the engine
 * exists. params may be NULL (defaults). */
doorbell_status_t doorbell_gpu_engine_create_for_iface(doorbell_iface_t *iface, const char *device,
                                                       const doorbell_gpu_engine_params_t *params,
                                                       doorbell_gpu_engine_t **engine_p);

/* A queue posting to qp (a QP of the engine's iface). params->post and
 * post_arg are set here. Mode AUTO: DOORBELL on the udp device (the ring in
 * host-mapped memory is its send queue); on verbs MLX5 (IBGDA) when qp is a
 * connected direct QP (doorbell_qp_create_direct) whose mlx5 objects export
 * and map into the producers' address space (params->memory->map_host;
 * params->mlx5_lkey is the producers' source key), else PROXY, said once
 * per engine on stderr with the device and the reason. Mode MLX5 fails
 * instead of falling back. */
doorbell_status_t doorbell_gpu_queue_create_for_qp(doorbell_gpu_engine_t *engine, doorbell_qp_t *qp,
                                                   const doorbell_gpu_queue_params_t *params,
                                                   doorbell_gpu_queue_t             **queue_p);

/* Creates a QP to the peer iface (addresses as above) and a queue on it;
 * the queue owns the QP. On verbs with mode AUTO or MLX5 the QP is direct
 * and the call waits (up to params->timeout_ns, progressing the iface) for
 * its connection, then sets up IBGDA as above; on any failure AUTO falls
 * back to a CPU-proxy queue on an ordinary QP and says why once. */
doorbell_status_t doorbell_gpu_queue_create_for_peer(doorbell_gpu_engine_t             *engine,
                                                     const void                        *device_addr,
                                                     const void                        *iface_addr,
                                                     const doorbell_gpu_queue_params_t *params,
                                                     doorbell_gpu_queue_t             **queue_p);

/* Destroys a queue made here (and its QP when it owns one). */
void doorbell_gpu_core_queue_destroy(doorbell_gpu_queue_t *queue);

/* Destroys an engine made by doorbell_gpu_engine_create_for_iface (its
 * queues first). The iface stays open. */
void doorbell_gpu_core_engine_destroy(doorbell_gpu_engine_t *engine);

#ifdef __cplusplus
}
#endif

#endif /* DOORBELL_GPU_CORE_H */
