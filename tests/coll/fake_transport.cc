#include "fake_transport.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace doorbell::coll::testing {

FakeFabric::FakeFabric(int size, size_t scratch_half, uint32_t flag_half) :
    size_(size), scratch_half_(scratch_half), flag_half_(flag_half)
{
    ops_.put_signal = &FakeFabric::put_signal;
    ops_.quiet      = &FakeFabric::quiet;
    ops_.progress   = &FakeFabric::progress;
    ops_.idle       = &FakeFabric::idle;
    for (int i = 0; i < size; i++) {
        auto ep      = std::make_unique<Endpoint>();
        ep->fabric   = this;
        ep->rank     = i;
        size_t bytes = (2 * scratch_half + 63) / 64 * 64;
        ep->scratch  = static_cast<unsigned char *>(std::aligned_alloc(64, bytes ? bytes : 64));
        std::memset(ep->scratch, 0xa5, bytes); // stale bytes, never zeros by luck
        ep->flags = new uint64_t[2 * flag_half]();
        scratch_of_.push_back(ep->scratch);
        eps_.push_back(std::move(ep));
    }
}

FakeFabric::~FakeFabric()
{
    for (auto &ep : eps_) {
        std::free(ep->scratch);
        delete[] ep->flags;
    }
}

void FakeFabric::set_topology(std::vector<int> node_of, std::vector<int> leaf_of)
{
    node_of_ = std::move(node_of);
    leaf_of_ = std::move(leaf_of);
    map_nodes();
}

void FakeFabric::map_nodes()
{
    node_scratch_of_.assign(size_, std::vector<const unsigned char *>(size_, nullptr));
    for (int rank = 0; rank < size_; rank++)
        for (int i = 0; i < size_; i++)
            if (node_of_.empty() ? i == rank : node_of_[i] == node_of_[rank])
                node_scratch_of_[rank][i] = scratch_of_[i];
}

doorbell_coll_team_t FakeFabric::team(int rank)
{
    doorbell_coll_team_t t{};
    t.ops          = &ops_;
    t.ctx          = eps_[rank].get();
    t.rank         = rank;
    t.size         = size_;
    t.scratch      = eps_[rank]->scratch;
    t.scratch_half = scratch_half_;
    t.flags        = eps_[rank]->flags;
    t.flag_half    = flag_half_;
    t.node_of      = node_of_.empty() ? nullptr : node_of_.data();
    t.leaf_of      = leaf_of_.empty() ? nullptr : leaf_of_.data();
    t.timeout_ns   = timeout_ns;
    t.yield        = 1; // more threads than cores
    t.peer_scratch = peers_readable_ ? scratch_of_.data() : nullptr;
    if (peers_readable_) {
        t.node_scratch = scratch_of_.data();
    } else if (node_readable_) {
        t.node_scratch = node_scratch_of_[rank].data();
    }
    return t;
}

int FakeFabric::put_signal(void *ctx, int peer, const void *src, size_t len, size_t offset,
                           uint32_t slot, uint64_t value)
{
    auto       *ep = static_cast<Endpoint *>(ctx);
    FakeFabric *f  = ep->fabric;
    if (f->failing_rank_.load() == ep->rank || peer < 0 || peer >= f->size_ || peer == ep->rank ||
        offset + len > 2 * f->scratch_half_ || slot >= 2 * f->flag_half_)
        return -1;
    Endpoint *dst = f->eps_[peer].get();
    ep->outstanding.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(dst->mu);
    dst->inbox.push_back(Put{ep->rank, src, len, offset, slot, value});
    return 0;
}

int FakeFabric::progress(void *ctx, int)
{
    auto *ep = static_cast<Endpoint *>(ctx);
    for (int events = 0;; events++) {
        Put p;
        {
            std::lock_guard<std::mutex> lock(ep->mu);
            if (ep->inbox.empty())
                return events;
            p = ep->inbox.front();
            ep->inbox.pop_front();
        }
        std::memcpy(ep->scratch + p.off, p.src, p.len);
        __atomic_store_n(&ep->flags[p.slot], p.value, __ATOMIC_RELEASE);
        ep->fabric->eps_[p.from]->outstanding.fetch_sub(1, std::memory_order_release);
    }
}

int FakeFabric::idle(void *ctx, int, const uint64_t *, uint64_t, unsigned)
{
    static_cast<Endpoint *>(ctx)->fabric->idle_calls_.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::yield();
    return 0;
}

int FakeFabric::quiet(void *ctx)
{
    auto *ep    = static_cast<Endpoint *>(ctx);
    auto  start = std::chrono::steady_clock::now();
    while (ep->outstanding.load(std::memory_order_acquire) != 0) {
        progress(ctx, -1);
        std::this_thread::yield();
        if (std::chrono::steady_clock::now() - start >
            std::chrono::nanoseconds(ep->fabric->timeout_ns))
            return -1;
    }
    return 0;
}

} // namespace doorbell::coll::testing
