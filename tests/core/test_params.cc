/* Every iface parameter has a range; a value outside it is refused with a
 * message that names the parameter, the value and the range, and nothing is
 * adjusted in silence. The edges of each range are accepted. */
#include "core/doorbell_core.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using Set = std::function<void(doorbell_iface_params_t &)>;

struct Case {
    const char *name;  ///< the parameter, as the message names it
    Set         set;   ///< makes it out of range
    const char *shown; ///< how the message shows the value and the range
};

std::vector<Case> out_of_range()
{
    using P = doorbell_iface_params_t;
    return {
        {"MTU", [](P &p) { p.mtu = 100; },
         "MTU = 100 is out of range: 0 (automatic) or bytes in [576, 64936]"},
        {"MTU", [](P &p) { p.mtu = 64937; }, "MTU = 64937 is out of range"},
        {"TX_QUEUE_LEN", [](P &p) { p.tx_queue_len = 99999999; },
         "TX_QUEUE_LEN = 99999999 is out of range: a power of two in [4, 65536]"},
        {"TX_QUEUE_LEN", [](P &p) { p.tx_queue_len = 1000; },
         "TX_QUEUE_LEN = 1000 is out of range: a power of two in [4, 65536]"},
        {"TX_QUEUE_LEN", [](P &p) { p.tx_queue_len = 0; }, "TX_QUEUE_LEN = 0 is out of range"},
        {"TX_BATCH", [](P &p) { p.tx_batch = 0; }, "TX_BATCH = 0 is out of range: [1, 4096]"},
        {"TX_MODERATION", [](P &p) { p.tx_moderation = 0; },
         "TX_MODERATION = 0 is out of range: [1, 65536]"},
        {"AM_CREDITS", [](P &p) { p.am_credits = 70000; },
         "AM_CREDITS = 70000 is out of range: [1, 65536]"},
        {"SEG_SIZE", [](P &p) { p.seg_size = 1 << 20; },
         "SEG_SIZE = 1048576 is out of range: bytes in [256, 65472]"},
        {"RX_QUEUE_LEN", [](P &p) { p.rx_queue_len = 0; },
         "RX_QUEUE_LEN = 0 is out of range: [1, 65536]"},
        {"RTO_MIN", [](P &p) { p.rto_min_ns = 0; },
         "RTO_MIN = 0 ns is out of range: [10 us, 60 s]"},
        {"RTO_MAX", [](P &p) { p.rto_max_ns = 1000000; },
         "RTO_MAX = 1 ms is out of range: RTO_MIN or more, in [50 ms, 60 s]"},
        {"RETRY_COUNT", [](P &p) { p.retry_count = 0; },
         "RETRY_COUNT = 0 is out of range: [1, 1000]"},
        {"KEEPALIVE_INTERVAL", [](P &p) { p.keepalive_interval_ns = 1000; },
         "KEEPALIVE_INTERVAL = 1 us is out of range: 0 (off) or [1 ms, 3600 s]"},
        {"KEEPALIVE_TIMEOUT", [](P &p) { p.keepalive_timeout_ns = 1500000000; },
         "KEEPALIVE_TIMEOUT = 1500 ms is out of range: twice KEEPALIVE_INTERVAL or more, in [2 s, "
         "3600 s]"},
        {"RX_REASSEMBLY", [](P &p) { p.rx_reassembly_bytes = 1000; },
         "RX_REASSEMBLY = 1000 is out of range: SEG_SIZE or more, bytes in [65536, 1073741824]"},
        {"PATHS", [](P &p) { p.paths = 17; },
         "PATHS = 17 is out of range: sockets (0: automatic) in [0, 16]"},
        {"IBRC_GAIN", [](P &p) { p.ibrc_gain = -1; },
         "IBRC_GAIN = -1 is out of range: 0 (derived) or a positive number"},
        {"CC_TARGET_DELAY", [](P &p) { p.cc_target_delay_ns = 2000000000; },
         "CC_TARGET_DELAY = 2 s is out of range: [0 ns, 1 s]"},
        {"CC_MIN_RATE", [](P &p) { p.cc_min_rate = -5; }, "CC_MIN_RATE = -5 is out of range"},
        {"CC_MAX_RATE", [](P &p) { p.cc_max_rate = std::numeric_limits<double>::infinity(); },
         "CC_MAX_RATE = inf is out of range"},
        {"CC_MIN_RATE",
         [](P &p) {
             p.cc_min_rate = 2e6;
             p.cc_max_rate = 1e6;
         },
         "CC_MIN_RATE = 2e+06 B/s is out of range: at most CC_MAX_RATE (1e+06 B/s)"},
    };
}

} // namespace

TEST(Params, DefaultsAreInRange)
{
    doorbell_iface_params_t p;
    doorbell_iface_params_init(&p);
    EXPECT_EQ(DOORBELL_OK, doorbell_iface_params_check(&p, "")) << doorbell_last_error();
}

TEST(Params, OutOfRangeIsRefusedNamingTheParameterTheValueAndTheRange)
{
    for (const Case &c : out_of_range()) {
        doorbell_iface_params_t p;
        doorbell_iface_params_init(&p);
        c.set(p);
        EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_params_check(&p, "UCX_DOORBELL_"))
            << c.name;
        std::string msg = doorbell_last_error();
        EXPECT_EQ(0u, msg.find(std::string("UCX_DOORBELL_") + c.shown)) << msg;
        /* and through iface_open, which adjusts nothing either */
        doorbell_pd_t    *pd;
        doorbell_iface_t *iface = nullptr;
        ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
        p.device = "lo";
        EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &iface)) << c.name;
        EXPECT_EQ(0u, std::string(doorbell_last_error()).find(c.shown)) << doorbell_last_error();
        EXPECT_EQ(nullptr, iface);
        doorbell_pd_destroy(pd);
    }
}

TEST(Params, EdgesOfTheRangesAreAccepted)
{
    using P = doorbell_iface_params_t;
    for (Set set : std::vector<Set>{
             [](P &p) { p.mtu = 576; },
             [](P &p) { p.mtu = 64936; },
             [](P &p) { p.tx_queue_len = 4; },
             [](P &p) { p.tx_queue_len = 65536; },
             [](P &p) { p.tx_batch = 1; },
             [](P &p) { p.seg_size = 256; },
             [](P &p) { p.seg_size = 65472; },
             [](P &p) { p.rto_min_ns = p.rto_max_ns = 10000; },
             [](P &p) { p.retry_count = 1000; },
             [](P &p) { p.keepalive_interval_ns = 0; },
             [](P &p) {
                 p.keepalive_interval_ns = 1000000;
                 p.keepalive_timeout_ns  = 10000000;
             },
             [](P &p) { p.rx_reassembly_bytes = 65536; },
             [](P &p) { p.paths = 0; },
             [](P &p) { p.paths = 1; },
             [](P &p) { p.paths = 16; },
             [](P &p) { p.cc_target_delay_ns = 1000000000; },
         }) {
        doorbell_iface_params_t p;
        doorbell_iface_params_init(&p);
        set(p);
        EXPECT_EQ(DOORBELL_OK, doorbell_iface_params_check(&p, "")) << doorbell_last_error();
    }
}
