// A one-sided transport between threads: every rank has scratch and flags in
// memory; a put is queued at the target and copied there when the target
// makes progress, reading the source at that moment, as a NIC would read it
// some time before the sender's quiet() returns. A schedule that rewrites a
// source before quiet() therefore delivers wrong data (and trips TSan).
#pragma once

#include "doorbell_coll.h"

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace doorbell::coll::testing {

class FakeFabric {
public:
    FakeFabric(int size, size_t scratch_half, uint32_t flag_half);
    FakeFabric(const FakeFabric &)            = delete;
    FakeFabric &operator=(const FakeFabric &) = delete;
    ~FakeFabric();

    // The team of `rank`, ready for doorbell_coll_allreduce (node_of/leaf_of
    // point into `topology_nodes`/`topology_leaves` when set).
    doorbell_coll_team_t team(int rank);
    void                 set_topology(std::vector<int> node_of, std::vector<int> leaf_of);
    // Teams see every rank's scratch (team.peer_scratch), as ranks on one
    // node with mapped memory do.
    void set_peers_readable(bool on) { peers_readable_ = on; }
    // Teams see the scratch of the ranks of their own node only
    // (team.node_scratch), as ranks on several hosts with mapped shared
    // memory inside each do.
    void set_node_readable(bool on)
    {
        node_readable_ = on;
        map_nodes();
    }
    // Puts issued by `rank` fail from now on.
    void     fail_puts_from(int rank) { failing_rank_.store(rank); }
    uint64_t timeout_ns = 30'000'000'000; // generous: CI machines are oversubscribed
    // Times a waiting rank handed the transport its idle time (ops.idle).
    uint64_t idle_calls() const { return idle_calls_.load(); }

private:
    struct Put {
        int         from;
        const void *src;
        size_t      len;
        size_t      off;
        uint32_t    slot;
        uint64_t    value;
    };
    struct Endpoint {
        FakeFabric           *fabric;
        int                   rank;
        unsigned char        *scratch;
        uint64_t             *flags;
        std::mutex            mu;
        std::deque<Put>       inbox; // guarded by mu
        std::atomic<uint64_t> outstanding{0};
    };
    void       map_nodes(); // fills node_scratch_of_ (before any thread runs)
    static int put_signal(void *ctx, int peer, const void *src, size_t len, size_t offset,
                          uint32_t slot, uint64_t value);
    static int quiet(void *ctx);
    static int progress(void *ctx, int peer);
    // Yields: puts land only when their target progresses, so a sleeping
    // target would never be woken.
    static int idle(void *ctx, int peer, const uint64_t *flag, uint64_t value, unsigned idle_polls);

    int                                             size_;
    size_t                                          scratch_half_;
    uint32_t                                        flag_half_;
    std::vector<std::unique_ptr<Endpoint>>          eps_;
    std::vector<int>                                node_of_, leaf_of_;
    std::vector<const unsigned char *>              scratch_of_;
    std::vector<std::vector<const unsigned char *>> node_scratch_of_; ///< per rank
    bool                                            peers_readable_ = false;
    bool                                            node_readable_  = false;
    std::atomic<int>                                failing_rank_{-1};
    std::atomic<uint64_t>                           idle_calls_{0};
    doorbell_coll_transport_ops_t                   ops_;
};

} // namespace doorbell::coll::testing
