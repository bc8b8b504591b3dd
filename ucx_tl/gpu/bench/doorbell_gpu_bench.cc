/*
 * doorbell-gpu-bench: put rate and latency over the UDP device to a forked
 * target process, for each way of ringing the doorbell, in one run:
 *   ring-only      CPU threads -> ring -> engine -> a null QP that completes
 *                  at once (10x the puts): the protocol's own cost, no device
 *   cpu-posted     a CPU thread builds WQEs and calls doorbell_qp_post itself
 *                  (batches of --batch), progressing the iface
 *   ring-doorbell  CPU threads write the GPU send ring; the engine thread
 *                  posts each doorbell's batch (the GPU protocol, CPU-driven)
 *   ring-proxy     same ring in CPU-proxy mode (the host thread coalesces)
 *   gpu-doorbell   a kernel writes the ring in host-mapped memory   [CUDA]
 *   gpu-proxy      same in CPU-proxy mode                            [CUDA]
 * Rate: puts of --bytes each, every --batch'th signaled (rings: one signal
 * per round). Latency: one put, then wait for its completion (the target's
 * ACK), repeated; median and 99th percentile in microseconds. The note
 * column gives each run's device doorbells and retransmits (on a loaded host
 * a short retransmit timeout turns scheduling delays into retransmits:
 * --rto-ms raises it).
 */
#include "doorbell_gpu_core.h"
#if defined(DOORBELL_HAVE_CUDA)
#include "doorbell_gpu_cuda.h"
#endif

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
    uint32_t puts       = 8000; ///< per rate run
    uint32_t lat        = 500;  ///< latency samples
    uint32_t bytes      = 8;
    uint32_t batch      = 16;
    uint32_t threads    = 2; ///< CPU producer threads
    uint32_t rto_ms     = 0; ///< first retransmit timeout; 0 = device default
    uint32_t idle_spins = 0; ///< engine passes before yielding; 0 = default
    bool     gpu        = true;
};

struct Target {
    uint8_t  dev[32], ifa[32];
    uint64_t addr;
    uint32_t rkey;
    int32_t  status;
    char     error[160]; ///< the target's doorbell_last_error() when status != OK
};

/* --rto-ms 0 keeps the device default (the parameter's range starts above 0). */
void set_rto(doorbell_iface_params_t *p, uint32_t rto_ms)
{
    if (rto_ms != 0) {
        p->rto_min_ns = uint64_t(rto_ms) * 1000000;
    }
}

struct Row {
    std::string path, producers;
    double      mputs = 0, p50_us = 0, p99_us = 0, wqes_per_post = 0;
    std::string note;
};

using Clock = std::chrono::steady_clock;

constexpr size_t   kTargetBytes = 4u << 20; ///< registered at the target
constexpr uint32_t kGpuBlocks   = 4;
constexpr uint32_t kGpuThreads  = 128;

double secs(Clock::time_point a, Clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

/* The target: registers a buffer, reports it, progresses until hung up. */
pid_t spawn_target(size_t bytes, uint32_t rto_ms, Target *t, int *hangup_fd)
{
    int up[2], down[2];
    if ((pipe(up) != 0) || (pipe(down) != 0)) {
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        Target                  info  = {};
        doorbell_pd_t          *pd    = nullptr;
        doorbell_iface_t       *iface = nullptr;
        doorbell_mr_t          *mr    = nullptr;
        std::vector<uint8_t>    buf(bytes);
        doorbell_iface_params_t p;
        doorbell_iface_params_init(&p);
        p.device = "lo";
        set_rto(&p, rto_ms);
        info.status = doorbell_pd_create(&pd);
        if (info.status == DOORBELL_OK) {
            info.status = doorbell_iface_open(pd, &p, &iface);
        }
        if (info.status == DOORBELL_OK) {
            info.status = doorbell_mr_register(pd, buf.data(), buf.size(),
                                               DOORBELL_ACCESS_REMOTE_WRITE, &mr, &info.rkey);
        }
        if (info.status == DOORBELL_OK) {
            doorbell_iface_get_device_address(iface, info.dev);
            doorbell_iface_get_address(iface, info.ifa);
            info.addr = (uint64_t)(uintptr_t)buf.data();
        } else {
            std::snprintf(info.error, sizeof(info.error), "%s", doorbell_last_error());
        }
        if ((write(up[1], &info, sizeof(info)) == sizeof(info)) && (info.status == 0)) {
            for (uint64_t n = 1;; ++n) {
                doorbell_iface_progress(iface);
                struct pollfd pfd = {down[0], POLLIN, 0};
                if (((n % 64) == 0) && (poll(&pfd, 1, 0) > 0)) {
                    break;
                }
            }
        }
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    struct pollfd pfd = {up[0], POLLIN, 0};
    if ((poll(&pfd, 1, 20000) <= 0) || (read(up[0], t, sizeof(*t)) != sizeof(*t))) {
        std::snprintf(t->error, sizeof(t->error), "no answer from it within 20 s");
        return -1;
    }
    if (t->status != DOORBELL_OK) {
        return -1;
    }
    close(up[0]);
    *hangup_fd = down[1];
    return pid;
}

void percentiles(std::vector<double> &v, Row *row)
{
    if (v.empty()) {
        return;
    }
    std::sort(v.begin(), v.end());
    row->p50_us = v[v.size() / 2] / 1000.0;
    row->p99_us = v[std::min(v.size() - 1, v.size() * 99 / 100)] / 1000.0;
}

struct Env {
    doorbell_pd_t    *pd     = nullptr;
    doorbell_iface_t *iface  = nullptr;
    Target            target = {};
};

void on_cookie(void *cookie, doorbell_status_t status)
{
    auto *c = static_cast<std::pair<uint64_t, int> *>(cookie);
    c->first++;
    if (status != DOORBELL_OK) {
        c->second = status;
    }
}

/* CPU-posted: this thread builds WQEs, posts them, progresses. */
Row run_cpu_posted(Env &env, const Options &o, const std::vector<uint8_t> &src)
{
    Row            row{"cpu-posted", "1 CPU thread"};
    doorbell_qp_t *qp = nullptr;
    if (doorbell_qp_create(env.iface, env.target.dev, env.target.ifa, &qp) != DOORBELL_OK) {
        row.note = doorbell_last_error();
        return row;
    }
    doorbell_iface_set_completion_handler(env.iface, on_cookie);
    std::pair<uint64_t, int> done{0, 0};
    doorbell_counters_t      c0, c1;
    doorbell_iface_get_counters(env.iface, &c0);

    std::vector<doorbell_wqe_t> w(o.batch);
    uint64_t                    batches = (o.puts + o.batch - 1) / o.batch, posted = 0;
    auto                        t0 = Clock::now();
    while ((posted < batches) && (done.second == 0)) {
        for (uint32_t k = 0; k < o.batch; ++k) {
            w[k] = doorbell_gpu_make_put(src.data(), o.bytes, env.target.addr, env.target.rkey);
        }
        w[o.batch - 1].flags |= DOORBELL_WQE_SIGNALED;
        w[o.batch - 1].wr_id = (uint64_t)(uintptr_t)&done;
        doorbell_status_t st = doorbell_qp_post(qp, w.data(), o.batch);
        if (st == DOORBELL_OK || st == DOORBELL_INPROGRESS) {
            posted++;
        } else if (st != DOORBELL_ERR_NO_RESOURCE) {
            row.note = doorbell_last_error();
            break;
        }
        doorbell_iface_progress(env.iface);
    }
    while ((done.first < posted) && (done.second == 0)) {
        doorbell_iface_progress(env.iface);
    }
    auto t1 = Clock::now();
    doorbell_iface_get_counters(env.iface, &c1);
    row.mputs         = double(posted * o.batch) / secs(t0, t1) / 1e6;
    row.wqes_per_post = double(c1.wqes - c0.wqes) /
                        double(std::max<uint64_t>(1, c1.doorbells - c0.doorbells));

    std::vector<double> lat;
    for (uint32_t i = 0; (i < o.lat) && (done.second == 0); ++i) {
        doorbell_wqe_t one = doorbell_gpu_make_put(src.data(), o.bytes, env.target.addr,
                                                   env.target.rkey);
        one.flags |= DOORBELL_WQE_SIGNALED;
        one.wr_id     = (uint64_t)(uintptr_t)&done;
        uint64_t want = done.first + 1;
        auto     a    = Clock::now();
        while (doorbell_qp_post(qp, &one, 1) == DOORBELL_ERR_NO_RESOURCE) {
            doorbell_iface_progress(env.iface);
        }
        while ((done.first < want) && (done.second == 0)) {
            doorbell_iface_progress(env.iface);
        }
        lat.push_back(std::chrono::duration<double, std::nano>(Clock::now() - a).count());
    }
    percentiles(lat, &row);
    if (done.second != 0) {
        row.note = doorbell_status_string((doorbell_status_t)done.second);
    }
    doorbell_qp_destroy(qp);
    return row;
}

/* An engine and a queue on this iface, in the given mode and memory. */
struct Queue {
    doorbell_gpu_engine_t *engine = nullptr;
    doorbell_gpu_queue_t  *queue  = nullptr;
    bool                   open(Env &env, const Options &o, doorbell_gpu_mode_t mode,
                                const doorbell_gpu_memory_ops_t *memory)
    {
        doorbell_gpu_engine_params_t ep;
        doorbell_gpu_engine_params_init(&ep);
        if (o.idle_spins != 0) {
            ep.idle_spins = o.idle_spins;
        }
        doorbell_gpu_queue_params_t qp;
        doorbell_gpu_queue_params_init(&qp);
        qp.size   = 4096;
        qp.mode   = mode;
        qp.memory = memory;
        return (doorbell_gpu_engine_create_for_iface(env.iface, "lo", &ep, &engine) ==
                DOORBELL_OK) &&
               (doorbell_gpu_queue_create_for_peer(engine, env.target.dev, env.target.ifa, &qp,
                                                   &queue) == DOORBELL_OK) &&
               (doorbell_gpu_engine_start(engine) == DOORBELL_OK);
    }
    double wqes_per_post() const
    {
        doorbell_gpu_queue_counters_t c;
        doorbell_gpu_queue_get_counters(queue, &c);
        return double(c.wqes) / double(std::max<uint64_t>(1, c.posts));
    }
    ~Queue()
    {
        if (engine != nullptr) {
            doorbell_gpu_core_engine_destroy(engine);
        }
    }
};

/* A device that accepts and completes every batch at once: the ring and
 * engine's own cost, without the UDP device. */
struct NullQp {
    std::vector<void *>      pending;
    static doorbell_status_t post(void *arg, const doorbell_wqe_t *w, unsigned n)
    {
        auto *q = static_cast<NullQp *>(arg);
        for (unsigned k = 0; k < n; ++k) {
            if (w[k].flags & DOORBELL_WQE_SIGNALED) {
                q->pending.push_back((void *)(uintptr_t)w[k].wr_id);
            }
        }
        return DOORBELL_OK;
    }
    static unsigned progress(void *arg)
    {
        auto    *q = static_cast<NullQp *>(arg);
        unsigned n = unsigned(q->pending.size());
        for (void *c : q->pending) {
            doorbell_gpu_engine_complete(c, DOORBELL_OK);
        }
        q->pending.clear();
        return n;
    }
};

Row run_ring_null(const Options &o, const std::vector<uint8_t> &src)
{
    Row    row{"ring-only", std::to_string(o.threads) + " CPU thread(s), null QP"};
    NullQp qp;
    doorbell_gpu_engine_params_t ep;
    doorbell_gpu_engine_params_init(&ep);
    if (o.idle_spins != 0) {
        ep.idle_spins = o.idle_spins;
    }
    ep.progress                        = NullQp::progress;
    ep.progress_arg                    = &qp;
    ep.name                            = "null";
    doorbell_gpu_engine_t      *engine = nullptr;
    doorbell_gpu_queue_t       *queue  = nullptr;
    doorbell_gpu_queue_params_t qpar;
    doorbell_gpu_queue_params_init(&qpar);
    qpar.post     = NullQp::post;
    qpar.post_arg = &qp;
    qpar.size     = 4096;
    qpar.mode     = DOORBELL_GPU_MODE_DOORBELL;
    if ((doorbell_gpu_engine_create(&ep, &engine) != DOORBELL_OK) ||
        (doorbell_gpu_queue_create(engine, &qpar, &queue) != DOORBELL_OK) ||
        (doorbell_gpu_engine_start(engine) != DOORBELL_OK)) {
        row.note = "engine setup failed";
        return row;
    }
    const doorbell_gpu_ring_t r          = doorbell_gpu_queue_host_ring(queue);
    uint32_t                  per_thread = 10 * o.puts / o.threads / o.batch;
    std::atomic<int>          err{0};
    auto                      t0 = Clock::now();
    std::vector<std::thread>  th;
    for (uint32_t t = 0; t < o.threads; ++t) {
        th.emplace_back([&] {
            std::vector<doorbell_wqe_t> w(o.batch);
            uint64_t                    end = 0;
            for (uint32_t i = 0; i < per_thread; ++i) {
                for (uint32_t k = 0; k < o.batch; ++k) {
                    w[k] = doorbell_gpu_make_put(src.data(), o.bytes, 0x1000, 1);
                }
                if (doorbell_gpu_ring_post(r, w.data(), o.batch, &end) != DOORBELL_OK) {
                    err = 1;
                    return;
                }
            }
            if (doorbell_gpu_ring_wait_completed(r, end) != DOORBELL_OK) {
                err = 1;
            }
        });
    }
    for (auto &t : th) {
        t.join();
    }
    auto t1   = Clock::now();
    row.mputs = double(per_thread) * o.batch * o.threads / secs(t0, t1) / 1e6;
    std::vector<double> lat;
    for (uint32_t i = 0; (i < o.lat) && (err.load() == 0); ++i) {
        doorbell_wqe_t one = doorbell_gpu_make_put(src.data(), o.bytes, 0x1000, 1);
        uint64_t       end = 0;
        auto           a   = Clock::now();
        if ((doorbell_gpu_ring_post(r, &one, 1, &end) != DOORBELL_OK) ||
            (doorbell_gpu_ring_wait_completed(r, end) != DOORBELL_OK)) {
            err = 1;
        }
        lat.push_back(std::chrono::duration<double, std::nano>(Clock::now() - a).count());
    }
    percentiles(lat, &row);
    doorbell_gpu_queue_counters_t c;
    doorbell_gpu_queue_get_counters(queue, &c);
    row.wqes_per_post = double(c.wqes) / double(std::max<uint64_t>(1, c.posts));
    if (err.load() != 0) {
        row.note = "a wait failed";
    }
    doorbell_gpu_engine_destroy(engine);
    return row;
}

/* CPU threads as producers on the ring: o.threads threads, batches of o.batch. */
Row run_ring(Env &env, const Options &o, const std::vector<uint8_t> &src, doorbell_gpu_mode_t mode)
{
    Row row{(mode == DOORBELL_GPU_MODE_PROXY) ? "ring-proxy" : "ring-doorbell",
            std::to_string(o.threads) + " CPU thread(s)"};
    Queue q;
    if (!q.open(env, o, mode, nullptr)) {
        row.note = "queue setup failed";
        return row;
    }
    const doorbell_gpu_ring_t r = doorbell_gpu_queue_host_ring(q.queue);
    std::atomic<int>          err{0};
    uint32_t                  per_thread = o.puts / o.threads / o.batch;
    auto                      t0         = Clock::now();
    std::vector<std::thread>  th;
    for (uint32_t t = 0; t < o.threads; ++t) {
        th.emplace_back([&] {
            std::vector<doorbell_wqe_t> w(o.batch);
            uint64_t                    end = 0;
            for (uint32_t i = 0; (i < per_thread) && (err.load() == 0); ++i) {
                for (uint32_t k = 0; k < o.batch; ++k) {
                    w[k] = doorbell_gpu_make_put(src.data(), o.bytes, env.target.addr,
                                                 env.target.rkey);
                }
                doorbell_status_t st = doorbell_gpu_ring_post(r, w.data(), o.batch, &end);
                if (st != DOORBELL_OK) {
                    err = st;
                }
            }
            doorbell_status_t st = doorbell_gpu_ring_wait_completed(r, end);
            if (st != DOORBELL_OK) {
                err = st;
            }
        });
    }
    for (auto &t : th) {
        t.join();
    }
    auto t1           = Clock::now();
    row.mputs         = double(per_thread) * o.batch * o.threads / secs(t0, t1) / 1e6;
    row.wqes_per_post = q.wqes_per_post();

    std::vector<double> lat;
    for (uint32_t i = 0; (i < o.lat) && (err.load() == 0); ++i) {
        doorbell_wqe_t    one = doorbell_gpu_make_put(src.data(), o.bytes, env.target.addr,
                                                      env.target.rkey);
        uint64_t          end = 0;
        auto              a   = Clock::now();
        doorbell_status_t st  = doorbell_gpu_ring_post(r, &one, 1, &end);
        if (st == DOORBELL_OK) {
            st = doorbell_gpu_ring_wait_completed(r, end);
        }
        if (st != DOORBELL_OK) {
            err = st;
        }
        lat.push_back(std::chrono::duration<double, std::nano>(Clock::now() - a).count());
    }
    percentiles(lat, &row);
    if (err.load() != 0) {
        row.note = doorbell_status_string((doorbell_status_t)err.load());
    }
    return row;
}

#if defined(DOORBELL_HAVE_CUDA)
Row run_gpu(Env &env, const Options &o, doorbell_gpu_mode_t mode)
{
    Row row{(mode == DOORBELL_GPU_MODE_PROXY) ? "gpu-proxy" : "gpu-doorbell",
            "GPU 4x128 threads, warp puts"};
    Queue q;
    if (!q.open(env, o, mode, doorbell_gpu_cuda_memory())) {
        row.note = "queue setup failed";
        return row;
    }
    void *src = nullptr;
    if (doorbell_gpu_cuda_memory()->alloc_shared(nullptr,
                                                 size_t(kGpuBlocks) * kGpuThreads * o.bytes, &src,
                                                 &src) != DOORBELL_OK) {
        row.note = "no host-mapped memory";
        return row;
    }
    doorbell_gpu_ring_t        ring  = doorbell_gpu_queue_device_ring(q.queue);
    doorbell_gpu_kernel_args_t a     = {};
    a.kind                           = DOORBELL_GPU_KERNEL_WARP;
    a.blocks                         = kGpuBlocks;
    a.threads                        = kGpuThreads;
    a.iters                          = std::max<uint32_t>(1, o.puts / (a.blocks * a.threads));
    a.bytes                          = o.bytes;
    a.local                          = src;
    a.remote_addr                    = env.target.addr;
    a.rkey                           = env.target.rkey;
    a.signal_addr                    = 0; /* plain puts, as the CPU rows */
    doorbell_gpu_kernel_result_t res = {};
    doorbell_status_t            st  = doorbell_gpu_cuda_run_puts(&ring, &a, &res);
    if ((st == DOORBELL_OK) && (res.status == DOORBELL_OK)) {
        row.mputs         = double(res.puts) / (res.elapsed_ns * 1e-9) / 1e6;
        row.wqes_per_post = q.wqes_per_post();
        a.iters           = o.lat;
        std::vector<double> lat(o.lat);
        if (doorbell_gpu_cuda_run_latency(&ring, &a, lat.data()) == DOORBELL_OK) {
            percentiles(lat, &row);
        }
    } else {
        row.note = doorbell_status_string((st != DOORBELL_OK) ? st : res.status);
    }
    doorbell_gpu_cuda_memory()->free_shared(nullptr, src);
    return row;
}
#endif

void usage()
{
    std::printf("usage: doorbell-gpu-bench [--puts N] [--lat N] [--bytes B] [--batch N]\n"
                "                          [--threads N] [--rto-ms MS] [--engine-spins N]\n"
                "                          [--no-gpu]\n");
}

} /* namespace */

int main(int argc, char **argv)
{
    Options                                   o;
    const std::pair<const char *, uint32_t *> numbers[] = {{"--puts", &o.puts},
                                                           {"--lat", &o.lat},
                                                           {"--bytes", &o.bytes},
                                                           {"--batch", &o.batch},
                                                           {"--threads", &o.threads},
                                                           {"--rto-ms", &o.rto_ms},
                                                           {"--engine-spins", &o.idle_spins}};
    for (int i = 1; i < argc; ++i) {
        std::string a     = argv[i];
        bool        taken = false;
        for (const auto &[flag, value] : numbers) {
            if (a == flag) {
                *value = (i + 1 < argc) ? uint32_t(std::strtoul(argv[++i], nullptr, 0)) : 0;
                taken  = true;
            }
        }
        if (taken) {
            continue;
        }
        if (a == "--no-gpu") {
            o.gpu = false;
        } else {
            usage();
            return (a == "-h" || a == "--help") ? 0 : 2;
        }
    }
    if ((o.bytes == 0) || (o.bytes > 4096) || (o.batch == 0) || (o.batch > 64) ||
        (o.threads == 0) || (o.puts < o.batch * o.threads)) {
        std::fprintf(stderr, "doorbell-gpu-bench: need 1 <= bytes <= 4096, 1 <= batch <= 64, "
                             "threads >= 1, puts >= batch * threads\n");
        return 2;
    }

    Env   env;
    int   hangup = -1;
    pid_t pid    = spawn_target(kTargetBytes, o.rto_ms, &env.target, &hangup); /* no threads yet */
    if (pid < 0) {
        std::fprintf(stderr, "doorbell-gpu-bench: the target process did not start: %s\n",
                     env.target.error);
        return 1;
    }
    doorbell_iface_params_t p;
    doorbell_iface_params_init(&p);
    p.device = "lo";
    set_rto(&p, o.rto_ms);
    if ((doorbell_pd_create(&env.pd) != DOORBELL_OK) ||
        (doorbell_iface_open(env.pd, &p, &env.iface) != DOORBELL_OK)) {
        std::fprintf(stderr, "doorbell-gpu-bench: %s\n", doorbell_last_error());
        return 1;
    }
    std::vector<uint8_t> src(4096, 0x5a);

    std::vector<Row> rows;
    /* each run's retransmits and doorbells go into its note */
    auto counted = [&](auto &&run) {
        doorbell_counters_t c0, c1;
        doorbell_iface_get_counters(env.iface, &c0);
        Row r = run();
        doorbell_iface_get_counters(env.iface, &c1);
        char buf[96];
        std::snprintf(buf, sizeof(buf), "%sdoorbells=%llu retransmits=%llu",
                      r.note.empty() ? "" : "; ", (unsigned long long)(c1.doorbells - c0.doorbells),
                      (unsigned long long)(c1.retransmits - c0.retransmits));
        r.note += buf;
        rows.push_back(r);
    };
    rows.push_back(run_ring_null(o, src));
    counted([&] { return run_cpu_posted(env, o, src); });
    counted([&] { return run_ring(env, o, src, DOORBELL_GPU_MODE_DOORBELL); });
    counted([&] { return run_ring(env, o, src, DOORBELL_GPU_MODE_PROXY); });
#if defined(DOORBELL_HAVE_CUDA)
    char reason[256];
    if (o.gpu && (doorbell_gpu_cuda_device_count(reason, sizeof(reason)) > 0)) {
        counted([&] { return run_gpu(env, o, DOORBELL_GPU_MODE_DOORBELL); });
        counted([&] { return run_gpu(env, o, DOORBELL_GPU_MODE_PROXY); });
    } else {
        rows.push_back(Row{"gpu-*", "-", 0, 0, 0, 0, o.gpu ? reason : "--no-gpu"});
    }
#else
    rows.push_back(Row{"gpu-*", "-", 0, 0, 0, 0, "built without CUDA"});
#endif

    std::printf("# doorbell-gpu-bench: udp device on lo, %u-byte puts, %u puts per rate run, "
                "batch %u, %u latency samples\n",
                o.bytes, o.puts, o.batch, o.lat);
    std::printf("%-14s %-30s %9s %9s %9s %10s  %s\n", "path", "producers", "Mput/s", "p50_us",
                "p99_us", "wqes/post", "note");
    for (const Row &r : rows) {
        std::printf("%-14s %-30s %9.3f %9.1f %9.1f %10.1f  %s\n", r.path.c_str(),
                    r.producers.c_str(), r.mputs, r.p50_us, r.p99_us, r.wqes_per_post,
                    r.note.c_str());
    }
    doorbell_iface_close(env.iface);
    doorbell_pd_destroy(env.pd);
    close(hangup);
    int st;
    waitpid(pid, &st, 0);
    return 0;
}
