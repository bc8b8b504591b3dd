/*
 * A group of CPU threads acting as one warp for the group posts
 * (doorbell_gpu_ring_group_post, doorbell_mlx5_qp_group_post): the
 * collectives a warp does with ballot/shuffle, done with a barrier.
 */
#pragma once

#include <barrier>
#include <cstdint>
#include <vector>

namespace doorbell_gpu_test {

struct HostGroupShared {
    explicit HostGroupShared(uint32_t n) : bar(n), vals(n) {}
    std::barrier<>        bar;
    std::vector<uint32_t> vals;
    uint64_t              bcast = 0;
};

class HostGroup {
public:
    HostGroup(HostGroupShared &s, uint32_t rank) : s_(s), rank_(rank) {}
    bool     is_leader() const { return rank_ == 0; }
    uint32_t exclusive_sum(uint32_t v, uint32_t *total_p)
    {
        s_.vals[rank_] = v;
        s_.bar.arrive_and_wait();
        uint32_t before = 0, total = 0;
        for (uint32_t k = 0; k < s_.vals.size(); ++k) {
            before += (k < rank_) ? s_.vals[k] : 0;
            total += s_.vals[k];
        }
        s_.bar.arrive_and_wait();
        *total_p = total;
        return before;
    }
    uint64_t broadcast(uint64_t v)
    {
        if (is_leader()) {
            s_.bcast = v;
        }
        s_.bar.arrive_and_wait();
        uint64_t r = s_.bcast;
        s_.bar.arrive_and_wait();
        return r;
    }
    void sync() { s_.bar.arrive_and_wait(); }

private:
    HostGroupShared &s_;
    uint32_t         rank_;
};

} /* namespace doorbell_gpu_test */
