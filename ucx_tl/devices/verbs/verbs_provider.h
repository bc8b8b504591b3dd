/*
 * The provider seam: every control-path verbs call of the device goes through
 * this table (real: libibverbs; tests: an in-memory fake). The data path
 * (ibv_post_send, ibv_post_recv, the ibv_cq_ex polling calls) is not in the
 * table: those are static inline in <infiniband/verbs.h> and dispatch through
 * context->ops and the ibv_cq_ex function pointers, which a fake context
 * fills in itself.
 */
#pragma once

#include <infiniband/verbs.h>

#include <string>

struct mlx5dv_obj; /* infiniband/mlx5dv.h, where the build has it */

namespace doorbell::verbs {

struct Provider {
    ibv_device **(*get_device_list)(int *num_devices);
    void (*free_device_list)(ibv_device **list);
    ibv_context *(*open_device)(ibv_device *device);
    int (*close_device)(ibv_context *context);
    int (*query_device_ex)(ibv_context *context, const ibv_query_device_ex_input *input,
                           ibv_device_attr_ex *attr);
    int (*query_port)(ibv_context *context, uint8_t port, ibv_port_attr *attr);
    int (*query_gid)(ibv_context *context, uint8_t port, int index, ibv_gid *gid);
    int (*query_rt_values_ex)(ibv_context *context, ibv_values_ex *values);
    ibv_pd *(*alloc_pd)(ibv_context *context);
    int (*dealloc_pd)(ibv_pd *pd);
    ibv_mr *(*reg_mr)(ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(ibv_mr *mr);
    ibv_comp_channel *(*create_comp_channel)(ibv_context *context);
    int (*destroy_comp_channel)(ibv_comp_channel *channel);
    int (*get_cq_event)(ibv_comp_channel *channel, ibv_cq **cq, void **ctx);
    void (*ack_cq_events)(ibv_cq *cq, unsigned count);
    ibv_cq_ex *(*create_cq_ex)(ibv_context *context, ibv_cq_init_attr_ex *attr);
    int (*destroy_cq)(ibv_cq *cq);
    ibv_qp *(*create_qp)(ibv_pd *pd, ibv_qp_init_attr *attr);
    int (*modify_qp)(ibv_qp *qp, ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(ibv_qp *qp);
    int (*modify_qp_rate_limit)(ibv_qp *qp, ibv_qp_rate_limit_attr *attr);
    ibv_ah *(*create_ah)(ibv_pd *pd, ibv_ah_attr *attr);
    int (*destroy_ah)(ibv_ah *ah);
    /// Where the port counters live: <root>/<hca>/ports/<port>/hw_counters.
    std::string sysfs_root;
    /// mlx5 direct verbs (null where the build has no mlx5dv): whether a
    /// device is an mlx5 device, and a QP's or CQ's buffers, doorbell
    /// records and UAR (mlx5dv_init_obj) for a send queue the GPU drives.
    bool (*mlx5_is_supported)(ibv_device *device)            = nullptr;
    int (*mlx5_init_obj)(mlx5dv_obj *obj, uint64_t obj_type) = nullptr;
};

/// The provider in use (libibverbs unless a test installed another).
const Provider &provider();
/// Installs a provider (tests); nullptr restores libibverbs. Not thread-safe
/// against concurrent device use.
void set_provider(const Provider *p);
/// The libibverbs provider.
const Provider &libibverbs_provider();

} // namespace doorbell::verbs
