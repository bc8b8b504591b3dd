/*
 * The engine: one host thread per device iface that consumes the GPU send
 * rings of its queues and posts each batch with one call (one doorbell), the
 * way a NIC consumes its send queue. Per pass and queue:
 *   take up to batch_max published WQEs (doorbell mode: below the doorbell;
 *   proxy mode: by sequence number), make only the last one signaled with a
 *   token as its wr_id (an inline WQE cannot carry a wr_id, so a signaled
 *   NOP follows it), post; NO_RESOURCE keeps the batch for the next pass.
 * A batch's completion advances the ring's completion index to its end;
 * an error completion fails the ring, which every producer wait returns.
 */
#include "doorbell_gpu.h"

#include "core/error.h"

#include <atomic>
#include <chrono>
#include <string>
#include <system_error>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr uint32_t kDefaultBatchMax    = 64;   ///< WQEs per post, as the CPU batcher
constexpr uint32_t kDefaultMaxInflight = 4096; ///< batches posted, not completed
constexpr uint32_t kDefaultIdleSpins   = 1024; ///< empty passes before yielding
constexpr uint32_t kDefaultRingSize    = 1024; ///< slots
constexpr uint32_t kMaxRingSize        = 1u << 24;
constexpr uint64_t kDefaultTimeoutNs   = 10ull * 1000 * 1000 * 1000; ///< 10 s
constexpr uint32_t kCookieMagic        = 0xdb9a7e11u;

/* Host memory for rings that CPU threads fill. */
doorbell_status_t host_alloc(void *, size_t bytes, void **host_p, void **device_p)
{
    size_t rounded = (bytes + 63) & ~size_t(63);
    void  *p       = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
        return doorbell::set_error(DOORBELL_ERR_NO_MEMORY, "no memory for %zu ring bytes", rounded);
    }
    std::memset(p, 0, rounded);
    *host_p = p;
    if (device_p != nullptr) {
        *device_p = p;
    }
    return DOORBELL_OK;
}

doorbell_status_t host_alloc_producer(void *arg, size_t bytes, void **ptr_p)
{
    return host_alloc(arg, bytes, ptr_p, nullptr);
}

void host_free(void *, void *p)
{
    std::free(p);
}

// clang-format off
const doorbell_gpu_memory_ops_t host_memory = {
    host_alloc, host_free, host_alloc_producer, host_free, nullptr, nullptr, nullptr
};
// clang-format on

} /* namespace */

/* A posted batch awaiting completion; its address is the signaled wr_id. */
struct doorbell_gpu_token {
    uint32_t             magic;
    uint32_t             queue_id;
    uint64_t             end; /* ring index after the batch */
    doorbell_gpu_engine *engine;
};

struct doorbell_gpu_queue {
    doorbell_gpu_engine      *engine;
    uint32_t                  id;
    doorbell_gpu_mode_t       mode;
    doorbell_gpu_post_func_t  post;
    void                     *post_arg;
    doorbell_gpu_memory_ops_t memory;
    void                     *shared_host;
    void                     *producer;    /* ring's producer words */
    doorbell_gpu_ring_t       host_ring;   /* consumer's view */
    doorbell_gpu_ring_t       device_ring; /* producers' view */

    /* engine thread only */
    uint64_t                    head;         /* next index to take */
    bool                        lower_signal; /* PUT_SIGNAL -> PUT + PUT */
    std::vector<doorbell_wqe_t> raw;          /* batch_max, as taken */
    std::vector<doorbell_wqe_t> staging;      /* 2 * batch_max + 1 (a NOP) */
    uint32_t                    staged;       /* WQEs in staging to post */
    uint32_t                    staged_slots; /* ring slots they cover */
    doorbell_gpu_token         *staged_token;

    std::atomic<bool> failed{false};
    std::mutex        error_lock; /* guards the two below */
    doorbell_status_t error_status = DOORBELL_OK;
    std::string       error_message; /* why it failed: device, queue, cause */
    struct {
        std::atomic<uint64_t> wqes{0}, posts{0}, retries{0}, nops{0}, completions{0}, lowered{0};
    } counters;
};

struct doorbell_gpu_engine {
    doorbell_gpu_engine_params_t                       params;
    std::string                                        name;
    std::mutex                                         lock; /* queues; held by each pass */
    std::unordered_map<uint32_t, doorbell_gpu_queue *> queues;
    uint32_t                                           next_queue_id = 1;
    std::vector<doorbell_gpu_token>                    tokens;
    std::vector<doorbell_gpu_token *>                  free_tokens;
    std::thread                                        thread;
    std::atomic<bool>                                  running{false};
    std::atomic<uint32_t> inflight{0}; /* batches posted, not completed */
};

namespace {

/* The first failure is the queue's: its status every producer wait returns,
 * its message what doorbell_gpu_queue_status() reports. */
void queue_fail(doorbell_gpu_queue *q, doorbell_status_t st, const char *why)
{
    {
        std::lock_guard<std::mutex> guard(q->error_lock);
        if (q->error_status == DOORBELL_OK) {
            q->error_status  = st;
            q->error_message = q->engine->name + ": GPU queue " + std::to_string(q->id) +
                               " failed: " + why + " (" + doorbell_status_string(st) + ")";
        }
    }
    doorbell_gpu_ring_fail(q->host_ring, st);
    q->failed.store(true);
}

/* A WQE from a producer is checked before the device sees it. */
bool wqe_valid(const doorbell_wqe_t &w)
{
    if (w.opcode >= DOORBELL_OP_LAST) {
        return false;
    }
    if ((w.flags & DOORBELL_WQE_INLINE) && (w.inline_len > DOORBELL_WQE_INLINE_MAX)) {
        return false;
    }
    if ((w.opcode == DOORBELL_OP_PUT_SIGNAL) && (w.am_id > DOORBELL_SIGNAL_ADD)) {
        return false;
    }
    return true;
}

/* For devices without DOORBELL_OP_PUT_SIGNAL: a SET signal is an 8-byte
 * inline put of the value after the data put (RC delivers in order, so the
 * flag lands after the data). An ADD has no put equivalent. */
bool lower_put_signal(const doorbell_wqe_t &w, doorbell_wqe_t *out)
{
    if (w.am_id != DOORBELL_SIGNAL_SET) {
        return false;
    }
    out[0]             = w;
    out[0].opcode      = DOORBELL_OP_PUT;
    out[0].am_id       = 0;
    out[0].signal_addr = out[0].signal_value = 0;
    out[0].signal_rkey                       = 0;
    doorbell_wqe_t s                         = {};
    s.opcode                                 = DOORBELL_OP_PUT;
    s.flags                                  = DOORBELL_WQE_INLINE | (w.flags & DOORBELL_WQE_FENCE);
    s.inline_len                             = 8;
    s.length                                 = 8;
    s.rkey                                   = w.signal_rkey;
    s.remote_addr                            = w.signal_addr;
    std::memcpy(s.inline_data, &w.signal_value, 8);
    out[1] = s;
    return true;
}

/* Takes the next batch from the ring into staging. Returns false when there
 * is nothing to post (empty ring, no token, or the queue failed). */
bool queue_stage(doorbell_gpu_engine *e, doorbell_gpu_queue *q)
{
    char     why[96];
    uint32_t n;

    if (e->free_tokens.empty() || (q->mode == DOORBELL_GPU_MODE_MLX5)) {
        return false; /* an MLX5 queue's producers post to the NIC */
    }
    n = doorbell_gpu_ring_consume(q->host_ring, q->head, e->params.batch_max, q->raw.data());
    if (n == 0) {
        doorbell_status_t pst = (doorbell_status_t)doorbell_gpu_port::load_relaxed(
            q->host_ring.producer_error);
        if (pst != DOORBELL_OK) {
            queue_fail(q, pst, "a producer gave up holding reserved slots");
        }
        return false;
    }
    uint32_t m = 0;
    for (uint32_t k = 0; k < n; ++k) {
        doorbell_wqe_t w = q->raw[k];
        if (!wqe_valid(w)) {
            std::snprintf(why, sizeof(why), "WQE %llu has opcode %u flags 0x%x",
                          (unsigned long long)(q->head + k), w.opcode, w.flags);
            queue_fail(q, DOORBELL_ERR_INVALID_PARAM, why);
            return false;
        }
        w.flags &= (uint8_t)~DOORBELL_WQE_SIGNALED;
        if (q->lower_signal && (w.opcode == DOORBELL_OP_PUT_SIGNAL)) {
            if (!lower_put_signal(w, &q->staging[m])) {
                std::snprintf(why, sizeof(why),
                              "WQE %llu: signal op %u has no "
                              "equivalent on this device (only SET lowers to a put)",
                              (unsigned long long)(q->head + k), w.am_id);
                queue_fail(q, DOORBELL_ERR_UNSUPPORTED, why);
                return false;
            }
            m += 2;
            q->counters.lowered.fetch_add(1, std::memory_order_relaxed);
        } else {
            q->staging[m++] = w;
        }
    }

    doorbell_gpu_token *t = e->free_tokens.back();
    e->free_tokens.pop_back();
    t->queue_id = q->id;
    t->end      = q->head + n;

    q->staged_slots      = n;
    q->staged            = m;
    doorbell_wqe_t *last = &q->staging[m - 1];
    if (last->flags & DOORBELL_WQE_INLINE) {
        /* wr_id shares bytes with inline_data: complete through a NOP */
        doorbell_wqe_t nop = {};
        nop.opcode         = DOORBELL_OP_NOP;
        q->staging[m]      = nop;
        last               = &q->staging[m];
        q->staged          = m + 1;
        q->counters.nops.fetch_add(1, std::memory_order_relaxed);
    }
    last->flags |= DOORBELL_WQE_SIGNALED;
    last->wr_id     = (uint64_t)(uintptr_t)t;
    q->staged_token = t;
    return true;
}

unsigned queue_poll(doorbell_gpu_engine *e, doorbell_gpu_queue *q)
{
    if (q->failed.load(std::memory_order_relaxed)) {
        return 0;
    }
    if ((q->staged == 0) && !queue_stage(e, q)) {
        return 0;
    }
    doorbell_status_t st = q->post(q->post_arg, q->staging.data(), q->staged);
    if (st == DOORBELL_ERR_NO_RESOURCE) {
        q->counters.retries.fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
    if ((st != DOORBELL_OK) && (st != DOORBELL_INPROGRESS)) {
        e->free_tokens.push_back(q->staged_token);
        q->staged       = 0;
        std::string why = std::string("posting a batch failed: ") + doorbell_last_error();
        queue_fail(q, st, why.c_str());
        return 0;
    }
    unsigned n = q->staged_slots;
    e->inflight.fetch_add(1, std::memory_order_relaxed);
    q->head += n;
    q->staged = 0;
    q->counters.wqes.fetch_add(n, std::memory_order_relaxed);
    q->counters.posts.fetch_add(1, std::memory_order_relaxed);
    return n;
}

/* REQUIRES: e->lock is held. */
unsigned engine_pass(doorbell_gpu_engine *e)
{
    unsigned work = 0;
    for (auto &kv : e->queues) {
        work += queue_poll(e, kv.second);
    }
    if (e->params.progress != nullptr) {
        work += e->params.progress(e->params.progress_arg);
    }
    return work;
}

void engine_run(doorbell_gpu_engine *e)
{
    uint32_t idle = 0;
    while (e->running.load(std::memory_order_acquire)) {
        unsigned work;
        {
            std::lock_guard<std::mutex> guard(e->lock);
            work = engine_pass(e);
        }
        if (work != 0) {
            idle = 0;
        } else if (++idle > e->params.idle_spins) {
            /* long idle: stop burning a core, stay within ~50 us -- but never
             * sleep while batches are in flight: their completions are due
             * and a sleeping thread wakes late on a busy host */
            bool inflight = e->inflight.load(std::memory_order_relaxed) != 0;
            if (!inflight && (idle > 4 * e->params.idle_spins)) {
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            } else {
                std::this_thread::yield();
            }
        }
    }
}

void queue_free(doorbell_gpu_queue *q)
{
    q->memory.free_shared(q->memory.arg, q->shared_host);
    q->memory.free_producer(q->memory.arg, q->producer);
    delete q;
}

} /* namespace */

extern "C" {

const char *doorbell_gpu_mode_string(doorbell_gpu_mode_t mode)
{
    switch (mode) {
    case DOORBELL_GPU_MODE_AUTO:
        return "auto";
    case DOORBELL_GPU_MODE_DOORBELL:
        return "doorbell";
    case DOORBELL_GPU_MODE_PROXY:
        return "proxy";
    case DOORBELL_GPU_MODE_MLX5:
        return "mlx5";
    }
    return "unknown";
}

void doorbell_gpu_engine_params_init(doorbell_gpu_engine_params_t *params)
{
    std::memset(params, 0, sizeof(*params));
    params->batch_max    = kDefaultBatchMax;
    params->max_inflight = kDefaultMaxInflight;
    params->idle_spins   = kDefaultIdleSpins;
    params->name         = "engine";
}

doorbell_status_t doorbell_gpu_engine_create(const doorbell_gpu_engine_params_t *params,
                                             doorbell_gpu_engine_t             **engine_p)
{
    if ((params == nullptr) || (params->batch_max == 0) || (params->batch_max > 4096) ||
        (params->max_inflight == 0)) {
        return doorbell::set_error(DOORBELL_ERR_INVALID_PARAM,
                                   "GPU engine: batch_max must be 1..4096 and max_inflight > 0");
    }
    auto *e = new (std::nothrow) doorbell_gpu_engine;
    if (e == nullptr) {
        return DOORBELL_ERR_NO_MEMORY;
    }
    e->params      = *params;
    e->name        = (params->name != nullptr) ? params->name : "engine";
    e->params.name = e->name.c_str();
    e->tokens.resize(params->max_inflight);
    for (auto &t : e->tokens) {
        t.magic  = kCookieMagic;
        t.engine = e;
        e->free_tokens.push_back(&t);
    }
    *engine_p = e;
    return DOORBELL_OK;
}

void doorbell_gpu_engine_destroy(doorbell_gpu_engine_t *engine)
{
    doorbell_gpu_engine_stop(engine);
    for (auto &kv : engine->queues) {
        doorbell_gpu_ring_fail(kv.second->host_ring, DOORBELL_ERR_CANCELED);
        queue_free(kv.second);
    }
    delete engine;
}

doorbell_status_t doorbell_gpu_engine_start(doorbell_gpu_engine_t *engine)
{
    if (engine->running.exchange(true)) {
        return DOORBELL_OK;
    }
    try {
        engine->thread = std::thread(engine_run, engine);
    } catch (const std::system_error &err) {
        engine->running.store(false);
        return doorbell::set_error(DOORBELL_ERR_IO, "%s: cannot start the GPU engine thread: %s",
                                   engine->name.c_str(), err.what());
    }
    return DOORBELL_OK;
}

void doorbell_gpu_engine_stop(doorbell_gpu_engine_t *engine)
{
    if (engine->running.exchange(false)) {
        engine->thread.join();
    }
}

unsigned doorbell_gpu_engine_progress(doorbell_gpu_engine_t *engine)
{
    std::lock_guard<std::mutex> guard(engine->lock);
    return engine_pass(engine);
}

void doorbell_gpu_engine_run_locked(doorbell_gpu_engine_t *engine, void (*fn)(void *arg), void *arg)
{
    std::lock_guard<std::mutex> guard(engine->lock);
    fn(arg);
}

void doorbell_gpu_engine_complete(void *cookie, doorbell_status_t status)
{
    auto *t = static_cast<doorbell_gpu_token *>(cookie);
    if ((t == nullptr) || (t->magic != kCookieMagic)) {
        return;
    }
    doorbell_gpu_engine *e  = t->engine;
    auto                 it = e->queues.find(t->queue_id);
    if (it != e->queues.end()) {
        doorbell_gpu_queue *q = it->second;
        if (status == DOORBELL_OK) {
            doorbell_gpu_ring_complete(q->host_ring, t->end);
            q->counters.completions.fetch_add(1, std::memory_order_relaxed);
        } else {
            queue_fail(q, status, "a batch completed with an error");
        }
    }
    e->inflight.fetch_sub(1, std::memory_order_relaxed);
    e->free_tokens.push_back(t);
}

void doorbell_gpu_queue_params_init(doorbell_gpu_queue_params_t *params)
{
    std::memset(params, 0, sizeof(*params));
    params->size       = kDefaultRingSize;
    params->mode       = DOORBELL_GPU_MODE_AUTO;
    params->timeout_ns = kDefaultTimeoutNs;
}

doorbell_status_t doorbell_gpu_queue_create(doorbell_gpu_engine_t             *engine,
                                            const doorbell_gpu_queue_params_t *params,
                                            doorbell_gpu_queue_t             **queue_p)
{
    doorbell_status_t st;

    bool mlx5 = (params != nullptr) && (params->mode == DOORBELL_GPU_MODE_MLX5);
    if ((params == nullptr) || ((params->post == nullptr) && !mlx5) || (params->size < 2) ||
        (params->size > kMaxRingSize) || (params->size & (params->size - 1)) ||
        (mlx5 && ((params->mlx5_host == nullptr) || (params->mlx5_device == nullptr)))) {
        return doorbell::set_error(DOORBELL_ERR_INVALID_PARAM,
                                   "%s: a GPU queue needs a post function (MLX5 mode: the QP's "
                                   "views) and a power-of-two size in 2..%u",
                                   engine ? engine->name.c_str() : "(no engine)", kMaxRingSize);
    }
    auto *q = new (std::nothrow) doorbell_gpu_queue;
    if (q == nullptr) {
        return DOORBELL_ERR_NO_MEMORY;
    }
    q->engine       = engine;
    q->mode         = (params->mode == DOORBELL_GPU_MODE_PROXY) ? DOORBELL_GPU_MODE_PROXY :
                      mlx5                                      ? DOORBELL_GPU_MODE_MLX5 :
                                                                  DOORBELL_GPU_MODE_DOORBELL;
    q->post         = params->post;
    q->post_arg     = params->post_arg;
    q->memory       = (params->memory != nullptr) ? *params->memory : host_memory;
    q->head         = 0;
    q->staged       = 0;
    q->staged_slots = 0;
    q->staged_token = nullptr;
    q->lower_signal = (params->flags & DOORBELL_GPU_QUEUE_LOWER_SIGNAL) != 0;
    q->raw.resize(engine->params.batch_max);
    q->staging.resize(2 * engine->params.batch_max + 1);

    void *shared_device = nullptr;
    st = q->memory.alloc_shared(q->memory.arg, doorbell_gpu_ring_shared_bytes(params->size),
                                &q->shared_host, &shared_device);
    if (st != DOORBELL_OK) {
        goto err_free;
    }
    st = q->memory.alloc_producer(q->memory.arg, sizeof(doorbell_gpu_ring_producer_words_t),
                                  &q->producer);
    if (st != DOORBELL_OK) {
        goto err_free_shared;
    }

    {
        uint32_t flags    = (q->mode == DOORBELL_GPU_MODE_PROXY) ? DOORBELL_GPU_RING_PROXY :
                            mlx5                                 ? DOORBELL_GPU_RING_MLX5 :
                                                                   0;
        auto    *producer = static_cast<doorbell_gpu_ring_producer_words_t *>(q->producer);
        q->host_ring      = doorbell_gpu_ring_layout(q->shared_host, producer, params->size, flags,
                                                     params->timeout_ns);
        q->device_ring    = doorbell_gpu_ring_layout(shared_device, producer, params->size, flags,
                                                     params->timeout_ns);
        if (mlx5) {
            /* the slots stay unused: the producers write the NIC's queue;
             * the ring's error word still cancels their waits */
            q->host_ring.mlx5   = params->mlx5_host;
            q->device_ring.mlx5 = params->mlx5_device;
        }
    }
    {
        std::lock_guard<std::mutex> guard(engine->lock);
        q->id = engine->next_queue_id++;
        engine->queues.emplace(q->id, q);
    }
    *queue_p = q;
    return DOORBELL_OK;

err_free_shared:
    q->memory.free_shared(q->memory.arg, q->shared_host);
err_free:
    /* the memory ops said why (doorbell_last_error); say what it was for */
    {
        std::string why = doorbell_last_error();
        delete q;
        return doorbell::set_error(st, "%s: cannot allocate a GPU ring of %u slots: %s",
                                   engine->name.c_str(), params->size, why.c_str());
    }
}

void doorbell_gpu_queue_destroy(doorbell_gpu_queue_t *queue)
{
    doorbell_gpu_engine *e = queue->engine;
    {
        std::lock_guard<std::mutex> guard(e->lock);
        e->queues.erase(queue->id);
        if (queue->staged != 0) {
            e->free_tokens.push_back(queue->staged_token);
        }
    }
    doorbell_gpu_ring_fail(queue->host_ring, DOORBELL_ERR_CANCELED);
    queue_free(queue);
}

doorbell_gpu_ring_t doorbell_gpu_queue_device_ring(const doorbell_gpu_queue_t *queue)
{
    return queue->device_ring;
}

doorbell_gpu_ring_t doorbell_gpu_queue_host_ring(const doorbell_gpu_queue_t *queue)
{
    return queue->host_ring;
}

doorbell_gpu_mode_t doorbell_gpu_queue_mode(const doorbell_gpu_queue_t *queue)
{
    return queue->mode;
}

void doorbell_gpu_queue_fail(doorbell_gpu_queue_t *queue, doorbell_status_t status,
                             const char *message)
{
    queue_fail(queue, status, (message != nullptr) ? message : "failed");
}

doorbell_status_t doorbell_gpu_queue_status(const doorbell_gpu_queue_t *queue)
{
    auto                       *q = const_cast<doorbell_gpu_queue_t *>(queue);
    std::lock_guard<std::mutex> guard(q->error_lock);
    if (q->error_status == DOORBELL_OK) {
        return DOORBELL_OK;
    }
    return doorbell::set_error(q->error_status, "%s", q->error_message.c_str());
}

void doorbell_gpu_queue_get_counters(const doorbell_gpu_queue_t    *queue,
                                     doorbell_gpu_queue_counters_t *c)
{
    c->wqes        = queue->counters.wqes.load(std::memory_order_relaxed);
    c->posts       = queue->counters.posts.load(std::memory_order_relaxed);
    c->retries     = queue->counters.retries.load(std::memory_order_relaxed);
    c->nops        = queue->counters.nops.load(std::memory_order_relaxed);
    c->completions = queue->counters.completions.load(std::memory_order_relaxed);
    c->lowered     = queue->counters.lowered.load(std::memory_order_relaxed);
    c->completed   = doorbell_gpu_port::load_acquire(queue->host_ring.completed);
}

} /* extern "C" */
