/* The libibverbs provider of the seam. */
#include "verbs_provider.h"

#ifdef DOORBELL_VERBS_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace doorbell::verbs {

namespace {

/* ibv_query_port, ibv_query_device_ex, ibv_create_cq_ex and
 * ibv_query_rt_values_ex are macros or static inline in verbs.h: wrap them */
int real_query_port(ibv_context *c, uint8_t port, ibv_port_attr *attr)
{
    return ibv_query_port(c, port, attr);
}
int real_query_device_ex(ibv_context *c, const ibv_query_device_ex_input *in,
                         ibv_device_attr_ex *attr)
{
    return ibv_query_device_ex(c, in, attr);
}
ibv_cq_ex *real_create_cq_ex(ibv_context *c, ibv_cq_init_attr_ex *attr)
{
    return ibv_create_cq_ex(c, attr);
}
int real_query_rt_values_ex(ibv_context *c, ibv_values_ex *values)
{
    return ibv_query_rt_values_ex(c, values);
}
int real_destroy_cq(ibv_cq *cq)
{
    return ibv_destroy_cq(cq);
}

// clang-format off
const Provider g_libibverbs = {
    ibv_get_device_list,
    ibv_free_device_list,
    ibv_open_device,
    ibv_close_device,
    real_query_device_ex,
    real_query_port,
    ibv_query_gid,
    real_query_rt_values_ex,
    ibv_alloc_pd,
    ibv_dealloc_pd,
    [](ibv_pd *pd, void *addr, size_t length, int access) {
        return ibv_reg_mr(pd, addr, length, access);
    },
    ibv_dereg_mr,
    ibv_create_comp_channel,
    ibv_destroy_comp_channel,
    ibv_get_cq_event,
    ibv_ack_cq_events,
    real_create_cq_ex,
    real_destroy_cq,
    ibv_create_qp,
    ibv_modify_qp,
    ibv_destroy_qp,
    ibv_modify_qp_rate_limit,
    ibv_create_ah,
    ibv_destroy_ah,
    "/sys/class/infiniband",
#ifdef DOORBELL_VERBS_MLX5DV
    mlx5dv_is_supported,
    mlx5dv_init_obj,
#else
    nullptr,
    nullptr,
#endif
};
// clang-format on

const Provider *g_current = &g_libibverbs;

} // namespace

const Provider &provider()
{
    return *g_current;
}

void set_provider(const Provider *p)
{
    g_current = p ? p : &g_libibverbs;
}

const Provider &libibverbs_provider()
{
    return g_libibverbs;
}

} // namespace doorbell::verbs
