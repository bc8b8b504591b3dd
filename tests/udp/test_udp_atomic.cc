/* Atomics on the UDP device: executed exactly once whatever the wire loses,
 * repeats or reorders (the responder answers a repeated request from its
 * cache), and the target's checks on hand-made requests. What every device
 * does with atomics is in the contract (tests/contract/contract_atomic.cc). */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/fault_injector.h"
#include "devices/udp/parser.h"

using namespace doorbell::test;
using doorbell::udp::AtomicArgs;
using doorbell::udp::FaultConfig;
using doorbell::udp::NakCode;
using doorbell::udp::Opcode;
using doorbell::udp::set_fault_injection;
using doorbell::udp::WireHeader;

namespace {

uint64_t word(const Region &r, size_t off = 0)
{
    uint64_t v;
    std::memcpy(&v, r.bytes.data() + off, 8);
    return v;
}

/// Posts one atomic, progressing while the QP has no room for it.
void atomic(LoopbackPair &pair, doorbell_atomic_op_t op, unsigned size, uint64_t operand,
            uint64_t compare, uint64_t raddr, uint32_t rkey, uint64_t *result, Completion *c)
{
    doorbell_status_t s;
    while ((s = doorbell_qp_atomic(pair.qa, op, size, operand, compare, raddr, rkey, result, c)) ==
           DOORBELL_ERR_NO_RESOURCE) {
        pair.progress();
    }
    ASSERT_EQ(DOORBELL_INPROGRESS, s) << doorbell_last_error();
}

/// An ATOMIC_REQ of a hand-made requester connected to the iface.
std::vector<uint8_t> atomic_request(const RawPeer &raw, uint32_t psn, uint8_t op, uint32_t size,
                                    uint64_t raddr, uint32_t rkey, uint64_t operand,
                                    uint64_t compare = 0)
{
    WireHeader h  = doorbell::udp::make_header(Opcode::kAtomicReq);
    h.flags       = doorbell::udp::kFlagFirst | doorbell::udp::kFlagLast;
    h.am_id       = op;
    h.token       = raw.conn_token;
    h.dst_qp      = raw.remote_qp;
    h.src_qp      = raw.my_qp;
    h.psn         = psn;
    h.remote_addr = raddr;
    h.rkey        = rkey;
    h.msg_length  = size;
    h.length      = sizeof(AtomicArgs);
    AtomicArgs           a{compare, operand};
    std::vector<uint8_t> d(sizeof(h) + sizeof(a));
    std::memcpy(d.data(), &h, sizeof(h));
    std::memcpy(d.data() + sizeof(h), &a, sizeof(a));
    return d;
}

} // namespace

/* Loss, duplication and reordering make requests and answers travel twice:
 * 200 fetch-adds and 200 compare-and-swap increments (each the value it
 * read plus one: a CAS that executed twice would fail the next) still land
 * exactly once, and every fetched value is one the word really held. */
TEST(UdpAtomic, ExactlyOnceUnderLossDuplicationAndReordering)
{
    LoopbackPair pair;
    FaultConfig  f{.tx_drop = 0.05, .rx_drop = 0.03, .duplicate = 0.3, .reorder = 0.1, .seed = 41};
    set_fault_injection(pair.a, &f);
    f.seed += 1;
    set_fault_injection(pair.b, &f);
    Region                  target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_ATOMIC);
    const unsigned          n = 200;
    std::vector<uint64_t>   fetched(n, ~uint64_t(0));
    std::vector<Completion> done(n);
    uint64_t                sent = 0;
    for (unsigned i = 0; i < n; ++i) {
        uint64_t v = 1 + i % 5;
        atomic(pair, DOORBELL_ATOMIC_ADD, 8, v, 0, target.addr(), target.rkey, &fetched[i],
               &done[i]);
        sent += v;
    }
    ASSERT_TRUE(pair.wait([&] { return done[n - 1].count == 1; }));
    EXPECT_EQ(sent, word(target));
    uint64_t expect = 0;
    for (unsigned i = 0; i < n; ++i) { /* in order: each saw the sum before it */
        ASSERT_EQ(1, done[i].count);
        EXPECT_EQ(DOORBELL_OK, done[i].status);
        EXPECT_EQ(expect, fetched[i]) << i;
        expect += 1 + i % 5;
    }

    /* CAS increments of the word at offset 8, one at a time */
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t   seen = ~uint64_t(0);
        Completion c;
        atomic(pair, DOORBELL_ATOMIC_CSWAP, 8, i + 1, i, target.addr(8), target.rkey, &seen, &c);
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
        ASSERT_EQ(DOORBELL_OK, c.status);
        ASSERT_EQ(i, seen) << "a compare-and-swap ran twice or not at all";
    }
    EXPECT_EQ(uint64_t(n), word(target, 8));
    auto a = pair.counters(pair.a), b = pair.counters(pair.b);
    EXPECT_GT(a.retransmits, 0u);
    EXPECT_GT(b.rx_duplicates, 0u);
    for (int i = 0; i < 50; ++i) { /* late copies change nothing */
        pair.progress();
    }
    EXPECT_EQ(sent, word(target));
    EXPECT_EQ(uint64_t(n), word(target, 8));
    EXPECT_EQ(0, pair.error_a.count) << pair.error_a.message;
}

/* A repeated request is answered from the responder's cache with the value
 * of its one execution; the target checks alignment and operand width. */
TEST(UdpAtomic, RepeatedRequestIsAnsweredFromTheCacheNotExecuted)
{
    LoopbackPair pair;
    Region       target(pair.pd, 64, DOORBELL_ACCESS_REMOTE_ATOMIC, 0);
    RawPeer      raw;
    ASSERT_TRUE(raw.connect_to(pair.b, 77, 0));
    auto add5 = atomic_request(raw, 0, DOORBELL_ATOMIC_ADD, 8, target.addr(), target.rkey, 5);
    raw.send_to(pair.b, add5.data(), add5.size());
    WireHeader r = raw.next_of(pair.b, Opcode::kAtomicResp);
    EXPECT_EQ(0u, r.psn);
    EXPECT_EQ(77u, r.dst_qp);
    EXPECT_EQ(0u, doorbell::udp::atomic_value(r)); /* the old value */
    EXPECT_EQ(5u, word(target));

    raw.send_to(pair.b, add5.data(), add5.size()); /* its answer was "lost" */
    r = raw.next_of(pair.b, Opcode::kAtomicResp);
    EXPECT_EQ(0u, r.psn);
    EXPECT_EQ(0u, doorbell::udp::atomic_value(r)); /* the same answer */
    EXPECT_EQ(5u, word(target));                   /* not added again */

    /* 4 bytes into the word: misaligned, refused, untouched */
    auto odd = atomic_request(raw, 1, DOORBELL_ATOMIC_ADD, 8, target.addr(4), target.rkey, 1);
    raw.send_to(pair.b, odd.data(), odd.size());
    WireHeader nak = raw.next_of(pair.b, Opcode::kNak);
    EXPECT_EQ(uint8_t(NakCode::kAccess), nak.am_id);
    EXPECT_EQ(uint32_t(doorbell::udp::NakCause::kMisaligned), nak.rkey);
    EXPECT_EQ(1u, nak.psn);
    EXPECT_EQ(5u, word(target));
    EXPECT_EQ(0u, word(target, 8));

    /* a 4-byte atomic whose operand does not fit it (another QP: the first
     * one is failed now) */
    RawPeer other;
    ASSERT_TRUE(other.connect_to(pair.b, 78, 0));
    auto wide = atomic_request(other, 0, DOORBELL_ATOMIC_SWAP, 4, target.addr(16), target.rkey,
                               uint64_t(1) << 40);
    other.send_to(pair.b, wide.data(), wide.size());
    nak = other.next_of(pair.b, Opcode::kNak);
    EXPECT_EQ(uint8_t(NakCode::kInvalid), nak.am_id);
    EXPECT_EQ(uint32_t(doorbell::udp::NakCause::kOperandTooWide), nak.rkey);
    EXPECT_EQ(0u, word(target, 16));
}

/* 4-byte atomics touch their four bytes only. */
TEST(UdpAtomic, FourByteWordsLeaveTheirNeighboursAlone)
{
    LoopbackPair pair;
    Region       target(pair.pd, 16, DOORBELL_ACCESS_REMOTE_ATOMIC, 0xee);
    uint64_t     old = 0;
    Completion   c;
    /* swap the 4 bytes at offset 4 (host order), then add across a carry */
    atomic(pair, DOORBELL_ATOMIC_SWAP, 4, 0xfffffffe, 0, target.addr(4), target.rkey, &old, &c);
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(0xeeeeeeeeu, old);
    Completion c2;
    atomic(pair, DOORBELL_ATOMIC_ADD, 4, uint64_t(-3) /* low 32 bits: -3 */, 0, target.addr(4),
           target.rkey, &old, &c2);
    ASSERT_TRUE(pair.wait([&] { return c2.count == 1; }));
    EXPECT_EQ(DOORBELL_OK, c2.status);
    EXPECT_EQ(0xfffffffeu, old);
    uint32_t w;
    std::memcpy(&w, target.bytes.data() + 4, 4);
    EXPECT_EQ(0xfffffffbu, w); /* wrapped in 32 bits */
    EXPECT_EQ(std::vector<uint8_t>(4, 0xee),
              std::vector<uint8_t>(target.bytes.begin(), target.bytes.begin() + 4));
    EXPECT_EQ(std::vector<uint8_t>(8, 0xee),
              std::vector<uint8_t>(target.bytes.begin() + 8, target.bytes.end()));
}
