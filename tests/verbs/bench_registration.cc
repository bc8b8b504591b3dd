/*
 * Registration cost with and without the registration cache, through the
 * fake provider's reg_mr (which touches every page, as pinning would; the
 * kernel's pinning and the HCA's MTT update are not in it). Prints numbers.
 *   doorbell_verbs_regbench [buffers] [rounds] [bytes]
 */
#include "devices/verbs/reg_cache.h"
#include "fake_verbs.h"

#include "core/clock.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace doorbell;
using namespace doorbell::verbs;

int main(int argc, char **argv)
{
    size_t buffers = argc > 1 ? strtoul(argv[1], nullptr, 0) : 64;
    size_t rounds  = argc > 2 ? strtoul(argv[2], nullptr, 0) : 200;
    size_t bytes   = argc > 3 ? strtoul(argv[3], nullptr, 0) : 65536;

    fake::Fabric    fabric;
    fake::HcaConfig cfg;
    fabric.add_hca(cfg);
    fabric.install();
    const Provider &prov = provider();
    int             n;
    ibv_device    **list = prov.get_device_list(&n);
    ibv_context    *ctx  = prov.open_device(list[0]);
    ibv_pd         *pd   = prov.alloc_pd(ctx);

    std::vector<std::vector<uint8_t>> bufs(buffers, std::vector<uint8_t>(bytes, 1));
    for (size_t capacity : {size_t(0), size_t(1024)}) {
        RegCache rc(
            [&](CachedRegion &r) {
                ibv_mr *mr = prov.reg_mr(pd, reinterpret_cast<void *>(r.start), r.end - r.start,
                                         IBV_ACCESS_LOCAL_WRITE);
                r.handle   = mr;
                r.lkey     = mr->lkey;
                return DOORBELL_OK;
            },
            [&](CachedRegion &r) { prov.dereg_mr(static_cast<ibv_mr *>(r.handle)); }, capacity);
        uint64_t regs0 = fabric.reg_mr_calls;
        uint64_t t0    = now_ns();
        for (size_t k = 0; k < rounds; ++k) {
            for (auto &b : bufs) {
                CachedRegion *r;
                rc.acquire(b.data(), b.size(), &r);
                rc.release(r);
            }
        }
        uint64_t t1  = now_ns();
        double   per = double(t1 - t0) / double(rounds * buffers);
        printf("%-14s buffers %zu x %zu bytes, %zu rounds: %.3f us per "
               "acquire+release, %llu reg_mr calls\n",
               capacity ? "with cache" : "without cache", buffers, bytes, rounds, per / 1000.0,
               (unsigned long long)(fabric.reg_mr_calls - regs0));
    }
    prov.dealloc_pd(pd);
    prov.close_device(ctx);
    return 0;
}
