/* Registration on another thread while the iface posts (the protection
 * domain is thread-safe; the iface's registration cache is not shared). */
#include "verbs_pair.h"

#include <atomic>
#include <thread>

using namespace doorbell;
using namespace doorbell::test;

TEST(VerbsThreads, RegistrationOnAnotherThreadWhilePosting)
{
    VerbsPair pair;
    pair.connect();
    std::vector<uint8_t> target(1 << 16);
    uint32_t rkey = pair.expose(target.data(), target.size(), DOORBELL_ACCESS_REMOTE_WRITE);
    std::vector<uint8_t> src(1 << 16, 3);
    std::atomic<bool>    stop{false};
    std::atomic<int>     cycles{0};
    std::thread          registrar([&] {
        while (!stop.load()) {
            doorbell_mr_t *mr;
            uint32_t       key;
            /* the same memory the posts use as a zero-copy source */
            if (doorbell_mr_register(pair.pda, src.data(), 4096, DOORBELL_ACCESS_REMOTE_READ, &mr,
                                              &key) == DOORBELL_OK) {
                doorbell_mr_deregister(pair.pda, mr);
            }
            cycles.fetch_add(1);
        }
    });
    while (cycles.load() == 0) {
        /* the registrar is running before the posts start */
    }
    for (int i = 0; i < 200 || cycles.load() < 20; ++i) {
        iovec      iov{src.data() + (i % 16) * 4096, 4096};
        Completion c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_put_zcopy(pair.qa, &iov, 1,
                                        uintptr_t(target.data()) + (i % 16) * 4096, rkey, &c));
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
        ASSERT_EQ(DOORBELL_OK, c.status);
    }
    stop = true;
    registrar.join();
    EXPECT_EQ(src, target);

    /* a deregistration reaches the cache at the iface's next post */
    Completion c;
    iovec      iov{src.data(), 4096};
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, uintptr_t(target.data()), rkey, &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    uint64_t       before = device(pair.a).reg_cache().stats().invalidations;
    doorbell_mr_t *mr;
    uint32_t       key;
    ASSERT_EQ(DOORBELL_OK, doorbell_mr_register(pair.pda, src.data(), 4096,
                                                DOORBELL_ACCESS_REMOTE_READ, &mr, &key));
    ASSERT_EQ(DOORBELL_OK, doorbell_mr_deregister(pair.pda, mr));
    EXPECT_EQ(before, device(pair.a).reg_cache().stats().invalidations);
    Completion d;
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_put_zcopy(pair.qa, &iov, 1, uintptr_t(target.data()), rkey, &d));
    EXPECT_EQ(before + 1, device(pair.a).reg_cache().stats().invalidations);
    ASSERT_TRUE(pair.wait([&] { return d.count == 1; }));
}
