/*
 * Run-time detection of the mlx5 IBGDA path: the build must have mlx5dv and
 * the host an mlx5 device. (Whether the GPU can map that device's UAR is
 * decided where the QP is exported; see docs/gpu.md.)
 */
#include "doorbell_gpu_mlx5.h"

#include <cstdio>

#if defined(DOORBELL_HAVE_MLX5DV)
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#endif

extern "C" doorbell_status_t doorbell_gpu_mlx5_probe(char *reason, size_t length)
{
#if !defined(DOORBELL_HAVE_MLX5DV)
    std::snprintf(reason, length, "built without infiniband/mlx5dv.h");
    return DOORBELL_ERR_UNSUPPORTED;
#else
    int                 count = 0, mlx5 = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    if (list == nullptr) {
        std::snprintf(reason, length, "ibv_get_device_list() failed: %m");
        return DOORBELL_ERR_NO_DEVICE;
    }
    const char *first = nullptr;
    for (int i = 0; i < count; ++i) {
        if (mlx5dv_is_supported(list[i])) {
            if (mlx5++ == 0) {
                first = ibv_get_device_name(list[i]);
            }
        }
    }
    if (mlx5 == 0) {
        std::snprintf(reason, length, "no mlx5 device among %d RDMA devices", count);
    } else {
        std::snprintf(reason, length, "%d mlx5 devices (first %s)", mlx5, first);
    }
    ibv_free_device_list(list);
    return (mlx5 == 0) ? DOORBELL_ERR_NO_DEVICE : DOORBELL_OK;
#endif
}
