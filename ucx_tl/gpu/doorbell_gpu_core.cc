/*
 * The engine on a core iface: progress is doorbell_iface_progress, each
 * queue posts with doorbell_qp_post, completions arrive through the iface's
 * completion handler (cookie = the engine's token) and asynchronous QP
 * errors fail the queue of that QP.
 */
#include "doorbell_gpu_core.h"
#include "doorbell_gpu_mlx5.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct CoreQueue {
    doorbell_qp_t *qp;
    bool           owned;
};

struct CoreEngine {
    doorbell_iface_t      *iface;
    std::string            device;
    doorbell_device_kind_t kind;
    std::mutex             lock; /* the maps below */
    std::unordered_map<doorbell_qp_t*, doorbell_gpu_queue_t*> by_qp;
    std::unordered_map<doorbell_gpu_queue_t*, CoreQueue>      queues;
};

std::mutex g_lock;
std::unordered_map<doorbell_gpu_engine_t*, CoreEngine*> g_engines;

CoreEngine *core_engine(doorbell_gpu_engine_t *engine)
{
    std::lock_guard<std::mutex> guard(g_lock);
    auto it = g_engines.find(engine);
    return (it == g_engines.end()) ? nullptr : it->second;
}

unsigned iface_progress(void *arg)
{
    return doorbell_iface_progress(static_cast<CoreEngine*>(arg)->iface);
}

doorbell_status_t qp_post(void *arg, const doorbell_wqe_t *wqes, unsigned count)
{
    doorbell_status_t st = doorbell_qp_post(static_cast<doorbell_qp_t*>(arg), wqes, count);
    if ((st != DOORBELL_OK) && (st != DOORBELL_INPROGRESS) &&
        (st != DOORBELL_ERR_NO_RESOURCE)) {
        std::fprintf(stderr, "doorbell gpu: doorbell_qp_post: %s\n", doorbell_last_error());
    }
    return st;
}

void qp_error(void *arg, doorbell_qp_t *qp, doorbell_status_t status, const char *message)
{
    auto *ce = static_cast<CoreEngine*>(arg);
    doorbell_gpu_queue_t *q = nullptr;
    {
        std::lock_guard<std::mutex> guard(ce->lock);
        auto it = ce->by_qp.find(qp);
        if (it != ce->by_qp.end()) {
            q = it->second;
        }
    }
    if (q != nullptr) {
        doorbell_gpu_queue_fail(q, status, message);
    }
}

/* AUTO: the ring is the udp device's send queue; a verbs QP of this build
 * is posted by the host (CPU proxy), and the reason is said once. */
doorbell_gpu_mode_t resolve_mode(const CoreEngine *ce, doorbell_gpu_mode_t mode)
{
    static std::atomic<bool> said{false};
    if ((mode != DOORBELL_GPU_MODE_AUTO) || (ce->kind != DOORBELL_DEVICE_VERBS)) {
        return (mode == DOORBELL_GPU_MODE_AUTO) ? DOORBELL_GPU_MODE_DOORBELL : mode;
    }
    if (!said.exchange(true)) {
        char reason[160];
        doorbell_gpu_mlx5_probe(reason, sizeof(reason));
        std::fprintf(stderr, "doorbell gpu: %s: the GPU cannot ring this device's doorbell "
                     "(IBGDA needs the verbs device to export its mlx5 SQ, doorbell record "
                     "and UAR to the GPU; mlx5 probe: %s): using CPU-proxy mode\n",
                     ce->device.c_str(), reason);
    }
    return DOORBELL_GPU_MODE_PROXY;
}

struct QpCall {
    doorbell_iface_t *iface;
    const void       *device_addr;
    const void       *iface_addr;
    doorbell_qp_t    *qp;
    doorbell_status_t status;
};

void create_qp_locked(void *arg)
{
    auto *c   = static_cast<QpCall*>(arg);
    c->status = doorbell_qp_create(c->iface, c->device_addr, c->iface_addr, &c->qp);
}

void destroy_qp_locked(void *arg)
{
    doorbell_qp_destroy(static_cast<doorbell_qp_t*>(arg));
}

} /* namespace */

extern "C" {

doorbell_status_t doorbell_gpu_engine_create_for_iface(doorbell_iface_t *iface,
                                                       const char *device,
                                                       const doorbell_gpu_engine_params_t *params,
                                                       doorbell_gpu_engine_t **engine_p)
{
    doorbell_gpu_engine_params_t ep;
    doorbell_status_t st;

    if ((iface == nullptr) || (device == nullptr)) {
        std::fprintf(stderr, "doorbell gpu: engine needs an iface and its device name\n");
        return DOORBELL_ERR_INVALID_PARAM;
    }
    auto *ce   = new CoreEngine;
    ce->iface  = iface;
    ce->device = device;
    ce->kind   = DOORBELL_DEVICE_UDP;
    doorbell_device_info_t infos[64];
    int n = doorbell_query_devices(infos, 64);
    for (int i = 0; i < n && i < 64; ++i) {
        if (ce->device == infos[i].name) {
            ce->kind = infos[i].kind;
        }
    }

    if (params != nullptr) {
        ep = *params;
    } else {
        doorbell_gpu_engine_params_init(&ep);
    }
    ep.progress     = iface_progress;
    ep.progress_arg = ce;
    ep.name         = device;
    st = doorbell_gpu_engine_create(&ep, engine_p);
    if (st != DOORBELL_OK) {
        delete ce;
        return st;
    }
    {
        std::lock_guard<std::mutex> guard(g_lock);
        g_engines.emplace(*engine_p, ce);
    }
    doorbell_iface_set_completion_handler(iface, doorbell_gpu_engine_complete);
    doorbell_iface_set_error_handler(iface, qp_error, ce);
    return DOORBELL_OK;
}

doorbell_status_t doorbell_gpu_queue_create_for_qp(doorbell_gpu_engine_t *engine,
                                                   doorbell_qp_t *qp,
                                                   const doorbell_gpu_queue_params_t *params,
                                                   doorbell_gpu_queue_t **queue_p)
{
    CoreEngine *ce = core_engine(engine);
    doorbell_gpu_queue_params_t qpar;
    doorbell_status_t st;

    if ((ce == nullptr) || (qp == nullptr)) {
        std::fprintf(stderr, "doorbell gpu: queue needs a QP and an engine made by "
                     "doorbell_gpu_engine_create_for_iface\n");
        return DOORBELL_ERR_INVALID_PARAM;
    }
    if (params != nullptr) {
        qpar = *params;
    } else {
        doorbell_gpu_queue_params_init(&qpar);
    }
    qpar.post     = qp_post;
    qpar.post_arg = qp;
    qpar.mode     = resolve_mode(ce, qpar.mode);
    /* the core's devices execute PUT_SIGNAL (SET and ADD) themselves,
     * once and after the data: the WQEs go as they are */
    qpar.flags   &= ~uint32_t(DOORBELL_GPU_QUEUE_LOWER_SIGNAL);
    st = doorbell_gpu_queue_create(engine, &qpar, queue_p);
    if (st != DOORBELL_OK) {
        return st;
    }
    std::lock_guard<std::mutex> guard(ce->lock);
    ce->by_qp[qp]        = *queue_p;
    ce->queues[*queue_p] = CoreQueue{qp, false};
    return DOORBELL_OK;
}

doorbell_status_t doorbell_gpu_queue_create_for_peer(doorbell_gpu_engine_t *engine,
                                                     const void *device_addr,
                                                     const void *iface_addr,
                                                     const doorbell_gpu_queue_params_t *params,
                                                     doorbell_gpu_queue_t **queue_p)
{
    CoreEngine *ce = core_engine(engine);
    if (ce == nullptr) {
        return DOORBELL_ERR_INVALID_PARAM;
    }
    QpCall call = {ce->iface, device_addr, iface_addr, nullptr, DOORBELL_OK};
    doorbell_gpu_engine_run_locked(engine, create_qp_locked, &call);
    if (call.status != DOORBELL_OK) {
        std::fprintf(stderr, "doorbell gpu: %s: cannot connect a QP: %s\n",
                     ce->device.c_str(), doorbell_last_error());
        return call.status;
    }
    doorbell_status_t st = doorbell_gpu_queue_create_for_qp(engine, call.qp, params, queue_p);
    if (st != DOORBELL_OK) {
        doorbell_gpu_engine_run_locked(engine, destroy_qp_locked, call.qp);
        return st;
    }
    std::lock_guard<std::mutex> guard(ce->lock);
    ce->queues[*queue_p].owned = true;
    return DOORBELL_OK;
}

void doorbell_gpu_core_queue_destroy(doorbell_gpu_queue_t *queue)
{
    doorbell_gpu_engine_t *engine = nullptr;
    CoreEngine *ce = nullptr;
    CoreQueue cq   = {nullptr, false};
    {
        std::lock_guard<std::mutex> guard(g_lock);
        for (auto &kv : g_engines) {
            std::lock_guard<std::mutex> g2(kv.second->lock);
            auto it = kv.second->queues.find(queue);
            if (it != kv.second->queues.end()) {
                engine = kv.first;
                ce     = kv.second;
                cq     = it->second;
                kv.second->queues.erase(it);
                kv.second->by_qp.erase(cq.qp);
                break;
            }
        }
    }
    doorbell_gpu_queue_destroy(queue);
    if ((ce != nullptr) && cq.owned) {
        doorbell_gpu_engine_run_locked(engine, destroy_qp_locked, cq.qp);
    }
}

void doorbell_gpu_core_engine_destroy(doorbell_gpu_engine_t *engine)
{
    CoreEngine *ce = core_engine(engine);
    if (ce != nullptr) {
        std::vector<doorbell_gpu_queue_t*> qs;
        {
            std::lock_guard<std::mutex> guard(ce->lock);
            for (auto &kv : ce->queues) {
                qs.push_back(kv.first);
            }
        }
        for (auto *q : qs) {
            doorbell_gpu_core_queue_destroy(q);
        }
        std::lock_guard<std::mutex> guard(g_lock);
        g_engines.erase(engine);
    }
    doorbell_gpu_engine_destroy(engine);
    delete ce;
}

} /* extern "C" */
