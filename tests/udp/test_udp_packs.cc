/* Active messages of one packet travel in packs (wire.h PackHeader): what a
 * doorbell batch holds for one peer shares a datagram, every message is
 * delivered once, in order, intact and with its 64 bytes of headroom, also
 * when a handler keeps one; a pack is taken apart by its connection's rules
 * (token, source, PSN) and forged or malformed ones reach no handler. */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/parser.h"

#include <cstring>

using namespace doorbell::test;
using namespace doorbell::udp;

namespace {

struct Delivered {
    uint8_t              am_id;
    std::vector<uint8_t> bytes;
    uint8_t             *data; ///< where it was delivered
};

struct Log {
    std::vector<Delivered> msgs;
    bool                   keep_odd = false; ///< keep (INPROGRESS) every other message
    std::vector<void *>    kept;
};

/// Records a message, scribbles over its headroom (the callee's to use),
/// and keeps the odd ones when asked.
doorbell_status_t log_am(void *arg, uint8_t am_id, void *data, size_t length)
{
    auto *log = static_cast<Log *>(arg);
    auto *p   = static_cast<uint8_t *>(data);
    log->msgs.push_back({am_id, std::vector<uint8_t>(p, p + length), p});
    std::memset(p - DOORBELL_AM_HEADROOM, 0xab, DOORBELL_AM_HEADROOM);
    if (log->keep_odd && log->msgs.size() % 2 == 0) {
        log->kept.push_back(data);
        return DOORBELL_INPROGRESS;
    }
    return DOORBELL_OK;
}

/// Posts n AMs back to back (no progress between them): the first rings at
/// once, the rest wait behind the busy queue's doorbell for one batch.
/// Message i has AM id 1 + i % 7 and 10 + 37 * i bytes of pattern i.
std::vector<std::vector<uint8_t>> post_burst(doorbell_qp_t *qp, unsigned n)
{
    std::vector<std::vector<uint8_t>> sent;
    for (unsigned i = 0; i < n; ++i) {
        Bytes b{pattern(10 + 37 * i, i)};
        EXPECT_EQ(ssize_t(b.v.size()), doorbell_qp_am_bcopy(qp, uint8_t(1 + i % 7), pack_bytes, &b))
            << doorbell_last_error();
        sent.push_back(b.v);
    }
    return sent;
}

} // namespace

TEST(UdpPacks, MessagesPostedTogetherShareADatagram)
{
    LoopbackPair pair(steady_params(), steady_params());
    Log          log;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    auto before = pair.counters(pair.a);
    auto sent   = post_burst(pair.qa, 10);
    ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == 10; }));
    ASSERT_EQ(10u, log.msgs.size());
    for (unsigned i = 0; i < 10; ++i) {
        EXPECT_EQ(1 + i % 7, log.msgs[i].am_id) << i;
        EXPECT_EQ(sent[i], log.msgs[i].bytes) << i;
    }
    auto a = pair.counters(pair.a);
    EXPECT_EQ(2u, a.packs - before.packs) << "the first alone, the nine behind it together";
    EXPECT_EQ(10u, a.packed - before.packed);
    EXPECT_EQ(2u, a.tx_packets - before.tx_packets);
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qa));
}

/* On the wire: one message has a 20-byte header (28 stamped), several 3
 * bytes more each, at consecutive PSNs. */
TEST(UdpPacks, APackOnTheWire)
{
    LoopbackPair   pair(steady_params(), steady_params());
    RawPeer        peer;
    doorbell_qp_t *qp = peer.connect_from(pair.a);
    ASSERT_NE(nullptr, qp);
    auto sent = post_burst(qp, 6);
    auto d    = peer.next(pair.a);
    ASSERT_FALSE(d.empty());
    ParseResult one = parse(d.data(), d.size());
    ASSERT_EQ(ParseStatus::kOk, one.status);
    EXPECT_EQ(1u, one.pack_count);
    EXPECT_EQ(28u, one.header_bytes) << "stamped: the connection has no RTT yet";
    EXPECT_EQ(d.size(), 28u + sent[0].size());
    EXPECT_EQ(RawPeer::kRawQp, one.header.dst_qp);
    EXPECT_EQ(sent[0], std::vector<uint8_t>(one.payload, one.payload + one.header.length));

    auto        rest = peer.next(pair.a);
    ParseResult five = parse(rest.data(), rest.size());
    ASSERT_EQ(ParseStatus::kOk, five.status);
    ASSERT_EQ(5u, five.pack_count);
    size_t payload = 0;
    for (unsigned i = 1; i < 6; ++i) {
        payload += sent[i].size();
    }
    EXPECT_GE(rest.size(), 20u + 5 * sizeof(PackMember) + payload);
    EXPECT_LE(rest.size(), 28u + 5 * sizeof(PackMember) + payload);
    PackReader     reader(five);
    WireHeader     h;
    const uint8_t *p;
    for (unsigned i = 1; i < 6; ++i) {
        ASSERT_TRUE(reader.next(h, p));
        EXPECT_EQ(one.header.psn + i, h.psn);
        EXPECT_EQ(1 + i % 7, h.am_id);
        EXPECT_EQ(sent[i], std::vector<uint8_t>(p, p + h.length));
    }
    doorbell_qp_destroy(qp); /* nobody ACKs */
}

/* Every message of a pack gets the 64 bytes before its data as headroom,
 * in place where they belong to nothing delivered; a message a handler
 * keeps is never overwritten by the headroom of the ones after it. */
TEST(UdpPacks, EveryMessageHasItsHeadroomAndKeptOnesStayIntact)
{
    LoopbackPair pair(steady_params(), steady_params());
    Log          log;
    log.keep_odd = true;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    auto sent = post_burst(pair.qa, 12);
    ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == 12; }));
    ASSERT_EQ(6u, log.kept.size());
    for (unsigned i = 0; i < 12; ++i) {
        EXPECT_EQ(sent[i], log.msgs[i].bytes) << i;
    }
    /* the kept ones, after every later message's headroom was scribbled on */
    for (unsigned i = 1; i < 12; i += 2) {
        EXPECT_EQ(0, std::memcmp(log.msgs[i].data, sent[i].data(), sent[i].size())) << i;
    }
    for (void *data : log.kept) {
        doorbell_iface_release_am(pair.b, data);
    }
    EXPECT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_GT(pair.counters(pair.a).packed, pair.counters(pair.a).packs);
}

/* A pack is a run of requests of one connection: a stranger's pack, one with
 * another connection's token, one from another source and a malformed one
 * reach no handler; a replayed one is a run of duplicates; a pack that
 * starts beyond the PSN expected is a gap. */
TEST(UdpPacks, ForgedReplayedAndEarlyPacksReachNoHandler)
{
    LoopbackPair pair(steady_params(), steady_params());
    Log          log;
    doorbell_iface_set_am_handler(pair.b, log_am, &log);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_am_short(pair.qa, 3, 7, nullptr, 0));
    ASSERT_TRUE(pair.wait([&] { return log.msgs.size() == 1; }));
    uint64_t token;
    uint32_t responder, next;
    ASSERT_TRUE(connection_of(pair.qa, &token, &responder, &next));

    auto make = [&](uint64_t tok, uint32_t psn) {
        uint8_t              head[32];
        uint32_t             n = encode_pack_header(head, 0, 2, 0, tok, responder, psn, 0);
        std::vector<uint8_t> d(head, head + n);
        for (uint8_t id : {uint8_t(5), uint8_t(6)}) {
            PackMember  m{id, 8};
            const auto *b = reinterpret_cast<const uint8_t *>(&m);
            d.insert(d.end(), b, b + sizeof(m));
            d.resize(d.size() + 8, 0xcc);
        }
        return d;
    };
    sockaddr_in from{};
    from.sin_family = AF_INET;
    doorbell_iface_get_device_address(pair.a, &from.sin_addr);
    from.sin_port         = iface_address(pair.a).port;
    sockaddr_in elsewhere = from;
    elsewhere.sin_port    = htons(9);

    auto before = pair.counters(pair.b);
    auto forged = make(token ^ 1, next);
    inject_datagram(pair.b, forged.data(), forged.size(), from);
    auto spoofed = make(token, next);
    inject_datagram(pair.b, spoofed.data(), spoofed.size(), elsewhere);
    auto cut = make(token, next);
    cut.pop_back(); /* the second message runs past the end */
    inject_datagram(pair.b, cut.data(), cut.size(), from);
    auto replay = make(token, next - 1); /* the AM already taken, and one more */
    auto early  = make(token, next + 5);
    inject_datagram(pair.b, early.data(), early.size(), from);
    auto c = pair.counters(pair.b);
    EXPECT_EQ(1u, c.rx_drop_token - before.rx_drop_token);
    EXPECT_EQ(1u, c.rx_drop_source - before.rx_drop_source);
    EXPECT_EQ(1u, c.rx_drop_malformed - before.rx_drop_malformed);
    EXPECT_EQ(2u, c.rx_drop_psn - before.rx_drop_psn) << "both of the early pack's";
    EXPECT_EQ(1u, log.msgs.size()) << "no handler was called";

    /* a replay: the first message is the AM already delivered (a
     * duplicate), the second the next PSN, which is taken once */
    inject_datagram(pair.b, replay.data(), replay.size(), from);
    EXPECT_EQ(1u, pair.counters(pair.b).rx_duplicates - before.rx_duplicates);
    ASSERT_EQ(2u, log.msgs.size());
    EXPECT_EQ(6, log.msgs[1].am_id);
    inject_datagram(pair.b, replay.data(), replay.size(), from);
    EXPECT_EQ(2u, log.msgs.size()) << "replayed whole: duplicates only";
}
