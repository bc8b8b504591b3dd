/*
 * The engine on a core iface: progress is doorbell_iface_progress, each
 * queue posts with doorbell_qp_post, completions arrive through the iface's
 * completion handler (cookie = the engine's token) and asynchronous QP
 * errors fail the queue of that QP.
 */
#include "doorbell_gpu_core.h"
#include "doorbell_gpu_mlx5.h"

#include "core/error.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <thread>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

/* An MLX5 (IBGDA) queue's host-side resources: the QP's views in shared
 * memory, the producers' control words, and the mappings of the NIC's
 * memory into the producers' address space. */
struct Mlx5Queue {
    doorbell_gpu_memory_ops_t memory;
    void                     *views_host = nullptr; /* [0] host, [1] device view */
    void                     *ctl        = nullptr;
    std::vector<void *>       mapped; /* host addresses */
};

struct CoreQueue {
    doorbell_qp_t *qp;
    bool           owned;
    Mlx5Queue     *mlx5;
};

struct CoreEngine {
    doorbell_iface_t                                           *iface;
    std::string                                                 device;
    doorbell_device_kind_t                                      kind;
    std::mutex                                                  lock; /* the maps below */
    std::unordered_map<doorbell_qp_t *, doorbell_gpu_queue_t *> by_qp;
    std::unordered_map<doorbell_gpu_queue_t *, CoreQueue>       queues;
    std::atomic<bool>                                           said_proxy{false};

    /// A queue made on one of this engine's QPs: found by its QP (errors)
    /// and by itself (destroy).
    void remember(doorbell_gpu_queue_t *queue, const CoreQueue &cq)
    {
        std::lock_guard<std::mutex> guard(lock);
        by_qp[cq.qp]  = queue;
        queues[queue] = cq;
    }
};

std::mutex                                                g_lock;
std::unordered_map<doorbell_gpu_engine_t *, CoreEngine *> g_engines;

CoreEngine *core_engine(doorbell_gpu_engine_t *engine)
{
    std::lock_guard<std::mutex> guard(g_lock);
    auto                        it = g_engines.find(engine);
    return (it == g_engines.end()) ? nullptr : it->second;
}

unsigned iface_progress(void *arg)
{
    return doorbell_iface_progress(static_cast<CoreEngine *>(arg)->iface);
}

doorbell_status_t qp_post(void *arg, const doorbell_wqe_t *wqes, unsigned count)
{
    /* a failure's message stays in doorbell_last_error(): the engine
     * fails the queue with it */
    return doorbell_qp_post(static_cast<doorbell_qp_t *>(arg), wqes, count);
}

void qp_error(void *arg, doorbell_qp_t *qp, doorbell_status_t status, const char *message)
{
    auto                 *ce = static_cast<CoreEngine *>(arg);
    doorbell_gpu_queue_t *q  = nullptr;
    {
        std::lock_guard<std::mutex> guard(ce->lock);
        auto                        it = ce->by_qp.find(qp);
        if (it != ce->by_qp.end()) {
            q = it->second;
        }
    }
    if (q != nullptr) {
        doorbell_gpu_queue_fail(q, status, message);
    }
}

/* The fallback to CPU-proxy mode, said once per engine (device) with the
 * reason: a notice, not an error (the queue works, only slower), and loud
 * because a silent fallback is what users of GPU-initiated RDMA trip over;
 * doorbell_gpu_queue_mode() tells a program. */
void say_proxy(CoreEngine *ce, const char *reason)
{
    if (!ce->said_proxy.exchange(true)) {
        std::fprintf(stderr,
                     "doorbell gpu: %s: the GPU cannot ring this device's doorbell "
                     "(%s): using CPU-proxy mode\n",
                     ce->device.c_str(), reason);
    }
}

/* AUTO: the ring is the udp device's send queue (DOORBELL); a verbs QP
 * that is not driven directly is posted by the host (PROXY). */
doorbell_gpu_mode_t resolve_mode(CoreEngine *ce, doorbell_gpu_mode_t mode, const char *why)
{
    if ((mode != DOORBELL_GPU_MODE_AUTO) || (ce->kind != DOORBELL_DEVICE_VERBS)) {
        return (mode == DOORBELL_GPU_MODE_AUTO) ? DOORBELL_GPU_MODE_DOORBELL : mode;
    }
    say_proxy(ce, why);
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
    auto *c   = static_cast<QpCall *>(arg);
    c->status = doorbell_qp_create(c->iface, c->device_addr, c->iface_addr, &c->qp);
}

void destroy_qp_locked(void *arg)
{
    doorbell_qp_destroy(static_cast<doorbell_qp_t *>(arg));
}

struct DirectCall {
    doorbell_iface_t *iface;
    const void       *device_addr;
    const void       *iface_addr;
    doorbell_qp_t    *qp;
    doorbell_status_t status;
    std::string       message;
};

void create_direct_locked(void *arg)
{
    auto *c   = static_cast<DirectCall *>(arg);
    c->status = doorbell_qp_create_direct(c->iface, c->device_addr, c->iface_addr, &c->qp);
    if (c->status != DOORBELL_OK) {
        c->message = doorbell_last_error();
    }
}

struct ExportCall {
    doorbell_iface_t  *iface;
    doorbell_qp_t     *qp;
    doorbell_qp_mlx5_t out;
    doorbell_status_t  status;
    std::string        message;
};

/* One attempt, between engine passes: progress (the handshake), export. */
void export_locked(void *arg)
{
    auto *c = static_cast<ExportCall *>(arg);
    doorbell_iface_progress(c->iface);
    c->status = doorbell_qp_export_mlx5(c->qp, &c->out);
    if ((c->status != DOORBELL_OK) && (c->status != DOORBELL_ERR_NO_RESOURCE)) {
        c->message = doorbell_last_error();
    }
}

void mlx5_free(Mlx5Queue *m)
{
    for (void *host : m->mapped) {
        m->memory.unmap_host(m->memory.arg, host);
    }
    if (m->ctl != nullptr) {
        m->memory.free_producer(m->memory.arg, m->ctl);
    }
    if (m->views_host != nullptr) {
        m->memory.free_shared(m->memory.arg, m->views_host);
    }
    delete m;
}

/* Maps [host, host + bytes) for the producers; identity without map_host. */
bool mlx5_map(Mlx5Queue *m, void *host, size_t bytes, int io, void **device_p, std::string *why)
{
    if (m->memory.map_host == nullptr) {
        *device_p = host;
        return true;
    }
    char msg[256] = "";
    if (m->memory.map_host(m->memory.arg, host, bytes, io, device_p, msg, sizeof(msg)) !=
        DOORBELL_OK) {
        *why = msg;
        return false;
    }
    m->mapped.push_back(host);
    return true;
}

/*
 * IBGDA on an exported direct QP: the QP's send queue, doorbell records,
 * UAR and CQ mapped for the producers, their views in shared memory and
 * their control words in producer memory. On failure *why says what the
 * producers cannot reach.
 */
doorbell_status_t mlx5_queue_create(doorbell_gpu_engine_t *engine, const doorbell_qp_mlx5_t &x,
                                    const doorbell_gpu_queue_params_t &params,
                                    doorbell_gpu_queue_t **queue_p, Mlx5Queue **mlx5_p,
                                    std::string *why)
{
    auto *m    = new Mlx5Queue;
    m->memory  = (params.memory != nullptr) ? *params.memory : doorbell_gpu_memory_ops_t{};
    bool  host = (params.memory == nullptr);
    void *sq = nullptr, *dbrec = nullptr, *uar = nullptr, *cq = nullptr, *cq_dbrec = nullptr;
    void *views_device = nullptr;
    doorbell_status_t st;

    if (x.sq_wqebbs > DOORBELL_MLX5_MAX_WQEBBS) {
        *why = "send queue of " + std::to_string(x.sq_wqebbs) + " WQEBBs exceeds " +
               std::to_string(DOORBELL_MLX5_MAX_WQEBBS);
        delete m;
        return DOORBELL_ERR_UNSUPPORTED;
    }
    if (!mlx5_map(m, x.sq_buf, size_t(x.sq_wqebbs) * DOORBELL_MLX5_WQEBB, 0, &sq, why) ||
        !mlx5_map(m, (void *)x.dbrec, 8, 0, &dbrec, why) || !mlx5_map(m, x.uar, 8, 1, &uar, why) ||
        !mlx5_map(m, x.cq_buf, size_t(x.cqe_cnt) * x.cqe_size, 0, &cq, why) ||
        !mlx5_map(m, (void *)x.cq_dbrec, 4, 0, &cq_dbrec, why)) {
        *why = "the GPU cannot map the NIC's queue or UAR: " + *why;
        mlx5_free(m);
        return DOORBELL_ERR_UNSUPPORTED;
    }
    if (host) {
        /* CPU producers: plain host memory */
        m->memory     = doorbell_gpu_memory_ops_t{};
        m->views_host = std::calloc(2, sizeof(doorbell_mlx5_qp_t));
        m->ctl        = std::aligned_alloc(64, sizeof(doorbell_mlx5_ctl_t));
        if ((m->views_host == nullptr) || (m->ctl == nullptr)) {
            std::free(m->views_host);
            std::free(m->ctl);
            delete m;
            return DOORBELL_ERR_NO_MEMORY;
        }
        std::memset(m->ctl, 0, sizeof(doorbell_mlx5_ctl_t));
        views_device = m->views_host;
    } else {
        st = m->memory.alloc_shared(m->memory.arg, 2 * sizeof(doorbell_mlx5_qp_t), &m->views_host,
                                    &views_device);
        if (st == DOORBELL_OK) {
            st = m->memory.alloc_producer(m->memory.arg, sizeof(doorbell_mlx5_ctl_t), &m->ctl);
        }
        if (st != DOORBELL_OK) {
            *why = "no memory for the queue's control words";
            mlx5_free(m);
            return st;
        }
    }
    auto *views = static_cast<doorbell_mlx5_qp_t *>(m->views_host);
    for (int side = 0; side < 2; ++side) {
        doorbell_mlx5_qp_t &v   = views[side];
        bool                dev = (side == 1);
        v.sq.buf                = static_cast<uint8_t *>(dev ? sq : x.sq_buf);
        v.sq.wqebbs             = x.sq_wqebbs;
        v.sq.qpn                = x.qpn;
        v.sq.dbrec              = static_cast<volatile uint32_t *>(dev ? dbrec : (void *)x.dbrec);
        v.sq.uar                = static_cast<volatile uint64_t *>(dev ? uar : x.uar);
        v.sq.lkey               = params.mlx5_lkey;
        v.sq.fetch_addr         = x.fetch_addr;
        v.sq.fetch_lkey         = x.fetch_lkey;
        v.cq.buf                = static_cast<uint8_t *>(dev ? cq : x.cq_buf);
        v.cq.cqe_cnt            = x.cqe_cnt;
        v.cq.cqe_size           = x.cqe_size;
        v.cq.dbrec   = static_cast<volatile uint32_t *>(dev ? cq_dbrec : (void *)x.cq_dbrec);
        v.cq.cqn     = x.cqn;
        v.ctl        = static_cast<doorbell_mlx5_ctl_t *>(m->ctl);
        v.timeout_ns = params.timeout_ns;
    }
    doorbell_gpu_queue_params_t qpar = params;
    qpar.mode                        = DOORBELL_GPU_MODE_MLX5;
    qpar.post                        = nullptr;
    qpar.post_arg                    = nullptr;
    qpar.mlx5_host                   = &views[0];
    qpar.mlx5_device                 = &static_cast<doorbell_mlx5_qp_t *>(views_device)[1];
    st                               = doorbell_gpu_queue_create(engine, &qpar, queue_p);
    if (st != DOORBELL_OK) {
        *why = "cannot create the queue";
        if (host) {
            std::free(m->views_host);
            std::free(m->ctl);
            delete m;
        } else {
            mlx5_free(m);
        }
        return st;
    }
    *mlx5_p = m;
    return DOORBELL_OK;
}

void mlx5_queue_free(Mlx5Queue *m)
{
    if (m->memory.free_shared == nullptr) {
        std::free(m->views_host);
        std::free(m->ctl);
        delete m;
    } else {
        mlx5_free(m);
    }
}

} /* namespace */

extern "C" {

doorbell_status_t doorbell_gpu_engine_create_for_iface(doorbell_iface_t *iface, const char *device,
                                                       const doorbell_gpu_engine_params_t *params,
                                                       doorbell_gpu_engine_t             **engine_p)
{
    doorbell_gpu_engine_params_t ep;
    doorbell_status_t            st;

    if ((iface == nullptr) || (device == nullptr)) {
        return doorbell::set_error(DOORBELL_ERR_INVALID_PARAM,
                                   "GPU engine: needs an iface and its device name");
    }
    auto *ce   = new CoreEngine;
    ce->iface  = iface;
    ce->device = device;
    ce->kind   = DOORBELL_DEVICE_UDP;
    doorbell_device_info_t infos[64];
    int                    n = doorbell_query_devices(infos, 64);
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
    st              = doorbell_gpu_engine_create(&ep, engine_p);
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

} /* extern "C" */

namespace {

/* IBGDA on qp (a direct QP, connected): export, map, queue. */
doorbell_status_t try_mlx5(doorbell_gpu_engine_t *engine, CoreEngine *ce, doorbell_qp_t *qp,
                           const doorbell_gpu_queue_params_t &qpar, bool owned,
                           doorbell_gpu_queue_t **queue_p, std::string *why)
{
    ExportCall call{ce->iface, qp, {}, DOORBELL_OK, {}};
    doorbell_gpu_engine_run_locked(engine, export_locked, &call);
    if (call.status == DOORBELL_ERR_NO_RESOURCE) {
        *why = "the QP is still connecting (progress the iface, then create the queue)";
        return call.status;
    }
    if (call.status != DOORBELL_OK) {
        *why = call.message;
        return call.status;
    }
    Mlx5Queue        *m  = nullptr;
    doorbell_status_t st = mlx5_queue_create(engine, call.out, qpar, queue_p, &m, why);
    if (st != DOORBELL_OK) {
        return st;
    }
    ce->remember(*queue_p, CoreQueue{qp, owned, m});
    return DOORBELL_OK;
}

doorbell_status_t queue_on_qp(doorbell_gpu_engine_t *engine, CoreEngine *ce, doorbell_qp_t *qp,
                              doorbell_gpu_queue_params_t qpar, const char *why,
                              doorbell_gpu_queue_t **queue_p)
{
    qpar.post     = qp_post;
    qpar.post_arg = qp;
    qpar.mode     = resolve_mode(ce, qpar.mode, why);
    /* the core's devices execute PUT_SIGNAL (SET and ADD) themselves,
     * once and after the data: the WQEs go as they are */
    qpar.flags &= ~uint32_t(DOORBELL_GPU_QUEUE_LOWER_SIGNAL);
    doorbell_status_t st = doorbell_gpu_queue_create(engine, &qpar, queue_p);
    if (st != DOORBELL_OK) {
        return st;
    }
    ce->remember(*queue_p, CoreQueue{qp, false, nullptr});
    return DOORBELL_OK;
}

bool wants_mlx5(const CoreEngine *ce, doorbell_gpu_mode_t mode)
{
    return (ce->kind == DOORBELL_DEVICE_VERBS) &&
           ((mode == DOORBELL_GPU_MODE_AUTO) || (mode == DOORBELL_GPU_MODE_MLX5));
}

/* MLX5 mode was asked for and cannot be had: why, as the call's error. */
doorbell_status_t no_ibgda_queue(const CoreEngine *ce, doorbell_status_t st, const std::string &why)
{
    return doorbell::set_error(st, "%s: no IBGDA queue: %s", ce->device.c_str(), why.c_str());
}

/* What both queue constructors start from: the engine's binding (nullptr,
 * with the message set, for an engine not made for an iface) and the
 * parameters (the defaults where none are given). */
CoreEngine *queue_start(doorbell_gpu_engine_t *engine, const doorbell_gpu_queue_params_t *params,
                        doorbell_gpu_queue_params_t *qpar)
{
    CoreEngine *ce = core_engine(engine);
    if (ce == nullptr) {
        doorbell::set_error(DOORBELL_ERR_INVALID_PARAM, "GPU queue: needs an engine made by "
                                                        "doorbell_gpu_engine_create_for_iface");
        return nullptr;
    }
    if (params != nullptr) {
        *qpar = *params;
    } else {
        doorbell_gpu_queue_params_init(qpar);
    }
    return ce;
}

} /* namespace */

extern "C" {

doorbell_status_t doorbell_gpu_queue_create_for_qp(doorbell_gpu_engine_t *engine, doorbell_qp_t *qp,
                                                   const doorbell_gpu_queue_params_t *params,
                                                   doorbell_gpu_queue_t             **queue_p)
{
    doorbell_gpu_queue_params_t qpar;
    CoreEngine                 *ce = queue_start(engine, params, &qpar);
    if (ce == nullptr) {
        return DOORBELL_ERR_INVALID_PARAM;
    }
    if (qp == nullptr) {
        return doorbell::set_error(DOORBELL_ERR_INVALID_PARAM, "%s: GPU queue: no QP given",
                                   ce->device.c_str());
    }
    std::string why = "IBGDA needs a direct QP (doorbell_qp_create_direct)";
    if (wants_mlx5(ce, qpar.mode)) {
        doorbell_status_t st = try_mlx5(engine, ce, qp, qpar, false, queue_p, &why);
        if (st == DOORBELL_OK) {
            return st;
        }
        if (qpar.mode == DOORBELL_GPU_MODE_MLX5) {
            return no_ibgda_queue(ce, st, why);
        }
    }
    return queue_on_qp(engine, ce, qp, qpar, why.c_str(), queue_p);
}

doorbell_status_t doorbell_gpu_queue_create_for_peer(doorbell_gpu_engine_t             *engine,
                                                     const void                        *device_addr,
                                                     const void                        *iface_addr,
                                                     const doorbell_gpu_queue_params_t *params,
                                                     doorbell_gpu_queue_t             **queue_p)
{
    doorbell_gpu_queue_params_t qpar;
    CoreEngine                 *ce = queue_start(engine, params, &qpar);
    if (ce == nullptr) {
        return DOORBELL_ERR_INVALID_PARAM;
    }
    std::string why;
    if (wants_mlx5(ce, qpar.mode)) {
        /* a direct QP, connected (the peer answers from its own progress),
         * then exported */
        DirectCall dc = {ce->iface, device_addr, iface_addr, nullptr, DOORBELL_OK, {}};
        doorbell_gpu_engine_run_locked(engine, create_direct_locked, &dc);
        doorbell_status_t st = dc.status;
        if (st != DOORBELL_OK) {
            why = dc.message;
        } else {
            auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::nanoseconds(qpar.timeout_ns);
            do {
                st = try_mlx5(engine, ce, dc.qp, qpar, true, queue_p, &why);
                if (st != DOORBELL_ERR_NO_RESOURCE) {
                    break;
                }
                std::this_thread::yield();
            } while (std::chrono::steady_clock::now() < deadline);
            if (st == DOORBELL_OK) {
                return st;
            }
            if (st == DOORBELL_ERR_NO_RESOURCE) {
                why = "the peer did not complete the connection in time";
                st  = DOORBELL_ERR_TIMED_OUT;
            }
            doorbell_gpu_engine_run_locked(engine, destroy_qp_locked, dc.qp);
        }
        if (qpar.mode == DOORBELL_GPU_MODE_MLX5) {
            return no_ibgda_queue(ce, st, why);
        }
        say_proxy(ce, why.c_str());
        qpar.mode = DOORBELL_GPU_MODE_PROXY;
    }
    QpCall call = {ce->iface, device_addr, iface_addr, nullptr, DOORBELL_OK};
    doorbell_gpu_engine_run_locked(engine, create_qp_locked, &call);
    if (call.status != DOORBELL_OK) {
        std::string why = doorbell_last_error();
        return doorbell::set_error(call.status, "%s: GPU queue: cannot connect a QP: %s",
                                   ce->device.c_str(), why.c_str());
    }
    doorbell_status_t st = queue_on_qp(engine, ce, call.qp, qpar, why.c_str(), queue_p);
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
    CoreEngine            *ce     = nullptr;
    CoreQueue              cq     = {nullptr, false, nullptr};
    {
        std::lock_guard<std::mutex> guard(g_lock);
        for (auto &kv : g_engines) {
            std::lock_guard<std::mutex> g2(kv.second->lock);
            auto                        it = kv.second->queues.find(queue);
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
    if (cq.mlx5 != nullptr) {
        mlx5_queue_free(cq.mlx5);
    }
    if ((ce != nullptr) && cq.owned) {
        doorbell_gpu_engine_run_locked(engine, destroy_qp_locked, cq.qp);
    }
}

void doorbell_gpu_core_engine_destroy(doorbell_gpu_engine_t *engine)
{
    CoreEngine *ce = core_engine(engine);
    if (ce != nullptr) {
        std::vector<doorbell_gpu_queue_t *> qs;
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
