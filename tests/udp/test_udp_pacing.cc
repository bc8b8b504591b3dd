/* The UDP device's pacing: a gate in front of sendmmsg, fed by the wire (a
 * fake gate the test opens and closes, and the real IBRC gate behind a
 * recording wrapper); the pacing parameters checked at open. The seam itself
 * is tested in tests/pacing. */
#include "loopback_pair.h"
#include "raw_peer.h"

#include "devices/udp/fault_injector.h"
#include "pacing/pacing_gate.h"
#include "devices/udp/udp_device.h"
#include "core/clock.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

using namespace doorbell::test;
using namespace doorbell::udp;
using namespace doorbell::pacing;

namespace {

/// Holds the kernel's receive timestamps on while it lives, and tells
/// whether they are in effect. The kernel turns them on for the whole
/// system in deferred work when the first socket asks (and off when the
/// last one closes), and a datagram that arrived before that work ran is
/// stamped when it is read: on a loaded host, the first milliseconds of a
/// test whose ifaces are its only stamping sockets.
class KernelStamps {
public:
    KernelStamps()
    {
        int on = 1;
        fd_    = socket(AF_INET, SOCK_DGRAM, 0);
        sockaddr_in a{};
        a.sin_family      = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len     = sizeof(a);
        ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0 &&
              getsockname(fd_, reinterpret_cast<sockaddr *>(&self_), &len) == 0 &&
              setsockopt(fd_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) == 0;
    }
    ~KernelStamps()
    {
        if (fd_ >= 0)
            close(fd_);
    }

    /// Whether a datagram left waiting 1 ms in the socket reads the time it
    /// arrived, not the time it was read; tries for up to 5 s.
    bool in_effect()
    {
        for (uint64_t t0 = doorbell::now_ns(); ok_ && doorbell::now_ns() - t0 < 5000000000ull;) {
            char c = 0;
            if (sendto(fd_, &c, 1, 0, reinterpret_cast<sockaddr *>(&self_), sizeof(self_)) != 1)
                return false;
            for (uint64_t t = doorbell::now_ns(); doorbell::now_ns() - t < 1000000;) {
                /* the datagram waits in the socket */
            }
            alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
            iovec                 iov{&c, 1};
            msghdr                m{};
            m.msg_iov        = &iov;
            m.msg_iovlen     = 1;
            m.msg_control    = control;
            m.msg_controllen = sizeof(control);
            if (recvmsg(fd_, &m, 0) != 1)
                return false;
            timespec now{};
            clock_gettime(CLOCK_REALTIME, &now);
            for (cmsghdr *h = CMSG_FIRSTHDR(&m); h != nullptr; h = CMSG_NXTHDR(&m, h)) {
                if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_TIMESTAMPNS) {
                    timespec at;
                    std::memcpy(&at, CMSG_DATA(h), sizeof(at));
                    int64_t waited = (now.tv_sec - at.tv_sec) * 1000000000ll +
                                     (now.tv_nsec - at.tv_nsec);
                    if (waited >= 500000)
                        return true;
                }
            }
        }
        return false;
    }

private:
    int         fd_ = -1;
    bool        ok_ = false;
    sockaddr_in self_{};
};

/// A gate the test opens and closes, recording what it was told.
struct FakeGate : PacingGate {
    struct Log {
        bool          open            = false;
        uint64_t      sends           = 0;
        uint64_t      send_bytes      = 0;
        uint64_t      acked_bytes     = 0;
        uint64_t      ce_bytes        = 0;
        uint64_t      rtt_samples     = 0;
        uint64_t      timed_samples   = 0; ///< of them, with the send time they measure
        uint64_t      losses          = 0;
        uint64_t      max_rtt         = 0; ///< ns, the largest sample given
        uint64_t      max_send        = 0; ///< bytes, the largest single charge
        int64_t       outstanding     = 0; ///< bytes charged and not yet acknowledged
        int64_t       max_outstanding = 0;
        double        rate_Bps        = 1e9;   ///< what rate() says
        uint64_t      release_ns      = 0;     ///< nonzero: closed until then (ns, now_ns clock)
        uint64_t      idle_messages   = 0;     ///< on_idle_message calls
        uint64_t      idle_bytes      = 0;     ///< and the bytes they announced
        bool          idle_opens      = false; ///< an announcement lets its bytes out,
        uint64_t      idle_credit     = 0;     ///< these (as the real pacer does)
        uint64_t      idle_ends       = 0;     ///< end_idle_grant calls
        uint64_t      marked_acks     = 0;     ///< feedback that carried marks
        uint64_t      unsampled_marks = 0;     ///< of them, without an RTT sample
        uint64_t      dated_marks     = 0;     ///< of them, dated by the packets acknowledged
        int           gates           = 0;
        PacingContext ctx;
    };
    explicit FakeGate(Log &log) : log_(log) {}
    uint64_t next_send_ns(uint64_t now, uint32_t) override
    {
        if (log_.release_ns != 0) {
            return std::max(now, log_.release_ns);
        }
        return log_.open || log_.idle_credit > 0 ? now : now + 1000000000ull;
    }
    void on_send(uint64_t, uint32_t bytes) override
    {
        log_.idle_credit -= std::min<uint64_t>(log_.idle_credit, bytes);
        ++log_.sends;
        log_.send_bytes += bytes;
        log_.max_send = std::max<uint64_t>(log_.max_send, bytes);
        log_.outstanding += bytes;
        log_.max_outstanding = std::max(log_.max_outstanding, log_.outstanding);
    }
    void on_ack(uint64_t now, uint64_t acked, uint64_t ce, uint64_t rtt, uint64_t sent) override
    {
        log_.acked_bytes += acked;
        log_.outstanding -= int64_t(acked);
        log_.ce_bytes += ce;
        log_.rtt_samples += rtt != 0;
        /* a sample's send time: before it by at least its round trip */
        log_.timed_samples += rtt != 0 && sent != 0 && sent + rtt <= now + kSentSlackNs;
        log_.max_rtt = std::max(log_.max_rtt, rtt);
    }
    void on_feedback(const Feedback &f) override
    {
        on_ack(f.now_ns, f.acked_bytes, f.ce_bytes, f.rtt_ns, f.sent_ns);
        if (f.ce_bytes != 0) {
            ++log_.marked_acks;
            log_.unsampled_marks += f.rtt_ns == 0;
            log_.dated_marks += f.acked_sent_ns != 0 && f.acked_sent_ns <= f.now_ns;
        }
    }
    void on_loss(uint64_t) override { ++log_.losses; }
    void on_idle_message(uint64_t, uint64_t bytes) override
    {
        ++log_.idle_messages;
        log_.idle_bytes += bytes;
        if (log_.idle_opens) {
            log_.idle_credit = std::max(log_.idle_credit, bytes);
        }
    }
    void end_idle_grant(uint64_t) override
    {
        ++log_.idle_ends;
        log_.idle_credit = 0;
    }
    double rate() const override { return log_.rate_Bps; }
    Log   &log_;
};

FakeGate::Log g_log;

/// Puts 1 MiB of pattern `seed` into target (of 1 MiB) over pair.qa and
/// checks it landed whole.
void put_mib(LoopbackPair &pair, Region &target, uint32_t seed)
{
    auto       data = pattern(1 << 20, seed);
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(data, target.bytes);
}

/// Reads dest.size() bytes at source over pair.qa into dest and waits for
/// the read's completion, whose status it leaves to the caller.
void get_into(LoopbackPair &pair, const Region &source, std::vector<uint8_t> &dest, Completion &c)
{
    iovec iov{dest.data(), dest.size()};
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qa, &iov, 1, source.addr(), source.rkey, &c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
}

void register_fake()
{
    register_pacing_policy("test-gate", [](const PacingContext &ctx) {
        g_log.ctx = ctx;
        ++g_log.gates;
        return std::make_unique<FakeGate>(g_log);
    });
}

/// What the device told a real gate (RecordingGate) and where its rate went.
struct Record {
    uint64_t sends = 0, acks = 0, rtts = 0, asks = 0, losses = 0;
    uint64_t sent_bytes = 0;
    double   min_rate = 1e300, max_rate = 0;
};

class RecordingGate final : public PacingGate {
public:
    RecordingGate(std::unique_ptr<PacingGate> inner, Record *rec) :
        inner_(std::move(inner)), rec_(rec)
    {
    }
    uint64_t next_send_ns(uint64_t now_ns, uint32_t bytes) override
    {
        ++rec_->asks;
        return inner_->next_send_ns(now_ns, bytes);
    }
    void on_send(uint64_t now_ns, uint32_t bytes) override
    {
        ++rec_->sends;
        rec_->sent_bytes += bytes;
        inner_->on_send(now_ns, bytes);
        note();
    }
    void on_ack(uint64_t now_ns, uint64_t acked, uint64_t ce, uint64_t rtt,
                uint64_t sent_ns) override
    {
        ++rec_->acks;
        rec_->rtts += rtt != 0;
        inner_->on_ack(now_ns, acked, ce, rtt, sent_ns);
        note();
    }
    void on_feedback(const Feedback &f) override
    {
        ++rec_->acks;
        rec_->rtts += f.rtt_ns != 0;
        inner_->on_feedback(f);
        note();
    }
    void on_loss(uint64_t now_ns) override
    {
        ++rec_->losses;
        inner_->on_loss(now_ns);
    }
    double rate() const override { return inner_->rate(); }

private:
    void note()
    {
        rec_->min_rate = std::min(rec_->min_rate, inner_->rate());
        rec_->max_rate = std::max(rec_->max_rate, inner_->rate());
    }
    std::unique_ptr<PacingGate> inner_;
    Record                     *rec_;
};

Record g_record;

doorbell_iface_params_t paced(const char *cc, double gain = 0)
{
    doorbell_iface_params_t p = lo_params();
    p.cc                      = cc;
    p.ibrc_gain               = gain;
    return p;
}

/// Params whose QPs get a FakeGate (fresh log; open: it lets packets pass).
doorbell_iface_params_t gated(doorbell_iface_params_t p, bool open)
{
    register_fake();
    g_log      = {};
    g_log.open = open;
    p.cc       = "test-gate";
    return p;
}

} // namespace

TEST(UdpPacing, GateHoldsPacketsAndIsFedByAcks)
{
    doorbell_iface_params_t p = gated(lo_params(), false);
    LoopbackPair            pair(p, p);
    EXPECT_EQ(2, g_log.gates); /* one per QP */
    EXPECT_EQ("lo", g_log.ctx.device);
    EXPECT_EQ("test-gate", g_log.ctx.policy);
    /* a host path's settings around the law reach the gate */
    EXPECT_EQ(kHostPathDelayNs, g_log.ctx.target_floor_ns);
    EXPECT_EQ(kHostCeGain, g_log.ctx.ce_gain);
    EXPECT_EQ(kHostCeBeta, g_log.ctx.ce_beta);
    EXPECT_EQ(kHostProbeStep, g_log.ctx.probe_step);

    Region     target(pair.pd, 1 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    auto       data = pattern(1 << 20, 2);
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c));
    for (int i = 0; i < 10; ++i) {
        pair.progress();
    }
    EXPECT_EQ(0u, pair.counters(pair.a).tx_packets); /* gate closed */
    EXPECT_EQ(0, c.count);
    g_log.open = true;
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(data, target.bytes);
    EXPECT_GE(g_log.sends, 17u); /* 1 MiB in <= 65000-byte packets */
    EXPECT_GE(g_log.acked_bytes, size_t(1) << 20);
    EXPECT_GT(g_log.rtt_samples, 0u);
    EXPECT_EQ(g_log.rtt_samples, g_log.timed_samples);
}

/* A message of several packets that begins on a QP with nothing in flight
 * is announced to the gate as idle (it may leave as one burst), with its
 * bytes and their headers; one posted behind it while the first is in flight
 * is not, nor is a message of one packet; one behind a short message still
 * in flight is. */
TEST(UdpPacing, AMessageOnAQuietQpIsAnnouncedToItsGate)
{
    doorbell_iface_params_t p = gated(lo_params(), true);
    p.mtu                     = 1024;
    LoopbackPair pair(p, p);
    auto        &qa = static_cast<UdpQp &>(*static_cast<doorbell::QpCore *>(pair.qa));
    Region       target(pair.pd, 16384, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     v = 7;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    EXPECT_EQ(0u, g_log.idle_messages) << "a message of one packet";
    /* the allowance: kHostIdleBurstSegments packets with their headers */
    EXPECT_GT(g_log.ctx.idle_burst_bytes, kHostIdleBurstSegments * sizeof(WireHeader));
    EXPECT_LE(g_log.ctx.idle_burst_bytes, kHostIdleBurstSegments * (1024 + sizeof(WireHeader)));

    /* the gate holds the first message; the second waits behind it, and
     * when the gate opens it leaves right after the first, in flight */
    g_log.open      = false;
    auto       data = pattern(8192, 5);
    Completion c1, c2;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c1));
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c2));
    pair.progress();
    EXPECT_EQ(1u, g_log.idle_messages);
    EXPECT_GE(g_log.idle_bytes, 8192u);
    EXPECT_LE(g_log.idle_bytes, 8192u + 9 * sizeof(WireHeader));
    g_log.open = true;
    ASSERT_TRUE(pair.wait([&] { return c1.count == 1 && c2.count == 1; }));
    EXPECT_EQ(1u, g_log.idle_messages) << "the second message followed the first in flight";
    EXPECT_EQ(data, std::vector<uint8_t>(target.bytes.begin(), target.bytes.begin() + 8192));

    /* once everything is acknowledged the QP is quiet again */
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    Completion c3;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c3));
    ASSERT_TRUE(pair.wait([&] { return c3.count == 1; }));
    EXPECT_EQ(2u, g_log.idle_messages);

    /* a short message still unacknowledged (a flag, whose ACK the peer may
     * hold) is no traffic in the network: the message behind it is
     * announced as well */
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    Completion c4;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c4));
    EXPECT_EQ(1u, qa.unacked.size()) << "the short one left, unacknowledged";
    ASSERT_TRUE(pair.wait([&] { return c4.count == 1; }));
    EXPECT_EQ(3u, g_log.idle_messages);

    /* a QP whose last transmit left work behind (a stream the pacer holds,
     * which only lost its core for a while) is no idle QP: its next message
     * is not announced, though nothing is in flight */
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    qa.backlog = true;
    Completion c5;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c5));
    ASSERT_TRUE(pair.wait([&] { return c5.count == 1 && qa.unacked.empty(); }));
    EXPECT_EQ(3u, g_log.idle_messages);
    EXPECT_FALSE(qa.backlog) << "everything left";
    Completion c6;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c6));
    ASSERT_TRUE(pair.wait([&] { return c6.count == 1; }));
    EXPECT_EQ(4u, g_log.idle_messages);
}

/* Idle windows (UdpIface::grant_window): short messages posted one by one on
 * a quiet QP leave while the gate lets them; when it would hold one before
 * the first ACK of new data, the window is granted the rest of the idle
 * allowance, once, and goes on unpaced. A window that has had its grant is
 * paced from there; after an ACK a quiet QP opens a new window. */
TEST(UdpPacing, AWindowOfShortMessagesOnAQuietQpIsGrantedTheIdleAllowanceOnce)
{
    doorbell_iface_params_t p = gated(lo_params(), false);
    p.mtu                     = 1024;
    g_log.idle_opens          = true;
    LoopbackPair pair(p, p);
    auto        &qa = static_cast<UdpQp &>(*static_cast<doorbell::QpCore *>(pair.qa));
    Region       target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t     allowance = g_log.ctx.idle_burst_bytes;
    ASSERT_GT(allowance, 16 * (8 + sizeof(WireHeader)));
    auto post = [&](int n, uint64_t seed) {
        for (int i = 0; i < n; ++i) {
            uint64_t v = seed + uint64_t(i);
            ASSERT_EQ(DOORBELL_OK,
                      doorbell_qp_put_short(pair.qa, &v, 8, target.addr() + 8 * i, target.rkey));
        }
    };
    auto landed = [&](int n, uint64_t seed) {
        for (int i = 0; i < n; ++i) {
            uint64_t v;
            std::memcpy(&v, target.bytes.data() + 8 * i, 8);
            EXPECT_EQ(seed + uint64_t(i), v) << i;
        }
    };

    /* the gate is closed: the window's first packet is granted the whole
     * allowance (nothing was sent yet), and the 16 puts leave unpaced */
    post(16, 100);
    pair.progress();
    EXPECT_EQ(1u, g_log.idle_messages);
    EXPECT_EQ(allowance, g_log.idle_bytes);
    EXPECT_EQ(1u, pair.counters(pair.a).idle_windows);
    EXPECT_EQ(0u, pair.counters(pair.a).paced_waits);
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    landed(16, 100);
    /* the path answered: what the window did not spend is taken back */
    EXPECT_EQ(1u, g_log.idle_ends);
    EXPECT_EQ(0u, g_log.idle_credit);

    /* acknowledged: the next put opens a new window. This gate grants
     * nothing now, so the puts wait, and the window is not announced again
     * however often the device tries */
    g_log.idle_opens = false;
    post(4, 200);
    for (int i = 0; i < 5; ++i) {
        pair.progress();
    }
    EXPECT_EQ(2u, g_log.idle_messages);
    EXPECT_EQ(2u, pair.counters(pair.a).idle_windows);
    EXPECT_GE(pair.counters(pair.a).paced_waits, 5u);
    EXPECT_FALSE(qa.unacked.empty()) << "held by the gate";
    g_log.open = true;
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    landed(4, 200);
    EXPECT_EQ(2u, g_log.idle_ends);

    /* an open gate holds nothing: no window needs a grant, none is ended */
    post(4, 300);
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    EXPECT_EQ(2u, g_log.idle_messages);
    EXPECT_EQ(2u, g_log.idle_ends);
    landed(4, 300);
}

/* A sender that waits on the event fd while the pacer holds its packets
 * sleeps until the pacer's departure time (a timer), instead of being told
 * "busy" and spinning: on a shared core the spin takes the CPU from the very
 * peers it waits for. */
TEST(UdpPacing, ArmSleepsUntilThePacerReleases)
{
    doorbell_iface_params_t p = gated(lo_params(), false);
    LoopbackPair            pair(p, p);
    Region                  target(pair.pd, 4096, DOORBELL_ACCESS_REMOTE_WRITE);
    auto                    data = pattern(4096, 5);
    Completion              c;
    g_log.release_ns = doorbell::now_ns() + 3600ull * 1000000000ull; /* far away */
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c));
    pair.progress();
    ASSERT_EQ(0u, pair.counters(pair.a).tx_packets); /* held by the pacer */

    pollfd pfd{doorbell_iface_event_fd(pair.a), POLLIN, 0};
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a)) << "paced: may sleep";
    EXPECT_EQ(0, poll(&pfd, 1, 0)) << "nothing is due before the release";

    g_log.release_ns = doorbell::now_ns() + 1000000; /* 1 ms */
    ASSERT_EQ(DOORBELL_OK, doorbell_iface_arm(pair.a));
    ASSERT_EQ(1, poll(&pfd, 1, 10000)) << "the release time wakes the sender";
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_EQ(data, target.bytes);
}

TEST(UdpPacing, GateHearsCeAndLoss)
{
    doorbell_iface_params_t p = gated(lo_params(), true);
    LoopbackPair            pair(p, p);
    FaultConfig             marks{.ce = 1.0, .seed = 5};
    set_fault_injection(pair.b, &marks);
    FaultConfig loss{.tx_drop = 0.2, .seed = 6};
    set_fault_injection(pair.a, &loss);
    Region target(pair.pd, 1 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    put_mib(pair, target, 3);
    EXPECT_GT(g_log.ce_bytes, 0u);
    EXPECT_GT(g_log.losses, 0u);
}

/* The marks an ACK reports are counted in the bytes it acknowledges (the
 * payload): a stream whose every packet arrives marked tells the gate that
 * all its bytes were marked, and no more, for bulk data and for 8-byte
 * messages alike (a resend may be marked twice). */
TEST(UdpPacing, AWhollyMarkedStreamIsMarkedByteForByte)
{
    doorbell_iface_params_t p = gated(lo_params(), true);
    LoopbackPair            pair(p, p);
    FaultConfig             marks{.ce = 1.0, .seed = 11};
    set_fault_injection(pair.b, &marks);
    Region target(pair.pd, 1 << 20, DOORBELL_ACCESS_REMOTE_WRITE);
    put_mib(pair, target, 8);
    auto &qa = static_cast<UdpQp &>(*static_cast<doorbell::QpCore *>(pair.qa));
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    uint64_t resent = pair.counters(pair.a).retransmits;
    EXPECT_EQ(g_log.acked_bytes, uint64_t(1) << 20);
    EXPECT_GE(g_log.ce_bytes, g_log.acked_bytes);
    /* (a resend is marked again, and may be cut differently: a packet's
     * worth and a segment header each) */
    EXPECT_LE(g_log.ce_bytes, g_log.acked_bytes + resent * (g_log.ctx.mtu + sizeof(WireHeader)))
        << resent << " packets resent";

    const uint64_t bulk_ce = g_log.ce_bytes, bulk_acked = g_log.acked_bytes;
    for (uint64_t i = 0; i < 256; ++i) {
        while (doorbell_qp_put_short(pair.qa, &i, 8, target.addr(8 * i), target.rkey) ==
               DOORBELL_ERR_NO_RESOURCE) {
            pair.progress();
        }
    }
    ASSERT_TRUE(pair.wait([&] { return qa.unacked.empty(); }));
    resent = pair.counters(pair.a).retransmits - resent;
    EXPECT_EQ(g_log.acked_bytes - bulk_acked, 256u * 8);
    EXPECT_GE(g_log.ce_bytes - bulk_ce, 256u * 8);
    EXPECT_LE(g_log.ce_bytes - bulk_ce, (256u + resent) * 8) << resent << " writes resent";
}

/* Reads are paced by the requester (receiver-driven): a READ_REQ is charged
 * the data it asks for, pieces are short bursts, and the data that comes back
 * is the feedback (bytes, marks, and an RTT from the first response). */
TEST(UdpPacing, ReadsAreChargedToTheRequesterInShortPieces)
{
    doorbell_iface_params_t p = gated(lo_params(), true);
    LoopbackPair            pair(p, p);
    FaultConfig             marks{.ce = 1.0, .seed = 9};
    set_fault_injection(pair.a, &marks); /* the read data arrives marked */
    const size_t len  = size_t(1) << 20;
    auto         data = pattern(len, 4);
    Region       source(pair.pd, len, DOORBELL_ACCESS_REMOTE_READ);
    std::copy(data.begin(), data.end(), source.bytes.begin());
    std::vector<uint8_t> dest(len);
    Completion           c;
    ASSERT_NO_FATAL_FAILURE(get_into(pair, source, dest, c));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, dest);
    const uint64_t mtu   = g_log.ctx.mtu;
    const uint64_t piece = 4 * mtu;   /* kReadPieceSegments */
    EXPECT_GE(g_log.send_bytes, len); /* every byte read was charged */
    EXPECT_GE(g_log.sends, len / piece);
    /* no request bigger than a piece and its response headers */
    EXPECT_LE(g_log.max_send, piece + (piece / mtu + 2) * 64);
    EXPECT_GE(g_log.acked_bytes, len);
    EXPECT_GE(g_log.ce_bytes, len);
    EXPECT_GT(g_log.rtt_samples, 0u);
}

/* Every marked ACK, and every marked read response, tells the gate when the
 * newest packet it answers first left, whether or not it carries an RTT
 * sample (a read's later responses carry none): the pacer's CWR rule dates
 * marks by it (tests/pacing). Undated, a mark counted as new. */
TEST(UdpPacing, EveryMarkIsDatedByThePacketsItAnswers)
{
    doorbell_iface_params_t p = gated(lo_params(), true);
    LoopbackPair            pair(p, p);
    FaultConfig             marks{.ce = 1.0, .seed = 11};
    set_fault_injection(pair.a, &marks); /* ACKs and read data arrive marked */
    set_fault_injection(pair.b, &marks); /* so does the written data */
    const size_t len = size_t(1) << 20;
    Region       target(pair.pd, len, DOORBELL_ACCESS_REMOTE_WRITE | DOORBELL_ACCESS_REMOTE_READ);
    auto         data = pattern(len, 12);
    Completion   put;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, put));
    ASSERT_TRUE(pair.wait([&] { return put.count == 1; }));
    std::vector<uint8_t> dest(len);
    Completion           get;
    ASSERT_NO_FATAL_FAILURE(get_into(pair, target, dest, get));
    EXPECT_EQ(data, dest);
    EXPECT_GT(g_log.marked_acks, 0u);
    EXPECT_GT(g_log.unsampled_marks, 0u);
    EXPECT_EQ(g_log.marked_acks, g_log.dated_marks);
}

/* A packet whose CE state differs from the previous one is ACKed at once
 * (not after the receiver's ACK delay, 625 ms here): marks reach the
 * sender's pacer within a round trip. */
TEST(UdpPacing, CeChangeIsAckedAtOnce)
{
    doorbell_iface_params_t p = gated(steady_params(), true);
    LoopbackPair            pair(p, p);
    FaultConfig             marks{.ce = 1.0, .seed = 3};
    set_fault_injection(pair.b, &marks);
    Region   target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t v = 5;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    while (pair.counters(pair.b).rx_packets == 0) {
        doorbell_iface_progress(pair.b);
    }
    EXPECT_EQ(1u, pair.counters(pair.b).tx_packets); /* the ACK, at once */
    ASSERT_TRUE(pair.wait([&] { return g_log.ce_bytes > 0; }));
    EXPECT_EQ(v, *reinterpret_cast<uint64_t *>(target.bytes.data()));
}

/* A paced QP keeps at most two bandwidth-delay products of reads
 * outstanding (at least two pieces): a responder that was descheduled
 * answers all it finds at once. At a (fake) rate near zero: two pieces. */
TEST(UdpPacing, OutstandingReadsAreBoundedByTheRate)
{
    doorbell_iface_params_t p = gated(lo_params(), true);
    LoopbackPair            pair(p, p);
    const size_t            len  = size_t(4) << 20;
    auto                    data = pattern(len, 8);
    Region                  source(pair.pd, len, DOORBELL_ACCESS_REMOTE_READ);
    std::copy(data.begin(), data.end(), source.bytes.begin());
    std::vector<uint8_t> dest(len);
    Completion           first; /* an RTT sample, unbounded */
    iovec                small{dest.data(), 100};
    ASSERT_EQ(DOORBELL_INPROGRESS,
              doorbell_qp_get_zcopy(pair.qa, &small, 1, source.addr(), source.rkey, &first));
    ASSERT_TRUE(pair.wait([&] { return first.count == 1; }));

    g_log.rate_Bps        = 1;
    g_log.outstanding     = 0;
    g_log.max_outstanding = 0;
    Completion c;
    ASSERT_NO_FATAL_FAILURE(get_into(pair, source, dest, c));
    EXPECT_EQ(DOORBELL_OK, c.status);
    EXPECT_EQ(data, dest);
    const int64_t piece = 4 * int64_t(g_log.ctx.mtu); /* kReadPieceSegments */
    EXPECT_GT(g_log.max_outstanding, 0);
    /* two pieces (plus the headers charged, which no ACK counts back), and
     * a piece for every request resent: a retransmit timeout that fires
     * while the process is off its core re-asks for a piece whose answer
     * is still coming, and the gate is charged for it again (the full
     * binary beside other work: 1 or 3 resends in some runs); unbounded,
     * all 4 MiB would be asked for at once */
    const int64_t resent = int64_t(pair.counters(pair.a).retransmits);
    EXPECT_LE(g_log.max_outstanding, (2 + resent) * piece + (32 << 10))
        << resent << " requests resent";
    EXPECT_LT(resent, 8) << "the bound would say nothing";
}

/* A paced iface takes kernel arrival times from its first datagram, both
 * ends: its pacer's samples hold neither its own scheduling nor its peer's
 * (below). An unpaced one (lo's auto: none) never pays for them: they cost
 * a fifth of an 8-byte round trip there. */
TEST(UdpPacing, KernelTimestampsOnAPacedIface)
{
    doorbell_iface_params_t p = gated(steady_params(), true);
    LoopbackPair            pair(p, p);
    Region                  target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t                v = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_GT(pair.counters(pair.a).rx_timestamped, 0u); /* its ACKs */
    EXPECT_GT(pair.counters(pair.b).rx_timestamped, 0u); /* the responder */

    LoopbackPair unpaced(steady_params(), steady_params());
    Region       there(unpaced.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(unpaced.qa, &v, 8, there.addr(), there.rkey));
    ASSERT_EQ(DOORBELL_OK, unpaced.flush(unpaced.qa));
    EXPECT_EQ(0u, unpaced.counters(unpaced.a).rx_timestamped);
    EXPECT_EQ(0u, unpaced.counters(unpaced.b).rx_timestamped);
}

/* A responder that was off its core when a request arrived (here: not
 * progressed for 30 ms) holds that time out of the requester's sample, as a
 * deferred ACK's delay: no rate helps it. The round trip the pacer and the
 * timers get is the path's, not the 30 ms. */
TEST(UdpPacing, AResponderOffItsCoreIsNoQueue)
{
    KernelStamps stamps; /* the hold counts from the kernel's arrival time */
    ASSERT_TRUE(stamps.in_effect()) << "the kernel stamps no datagram at its arrival";
    doorbell_iface_params_t p = gated(steady_params(), true);
    LoopbackPair            pair(p, p);
    Region                  target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t                v = 1;
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa)); /* connected, both ends looked */
    g_log.max_rtt         = 0;
    g_log.rtt_samples     = 0;
    const uint64_t gap_ns = 30000000;
    /* a signaled put: its packet asks for the ACK, which b sends when it
     * takes it, echoing it */
    auto       data = pattern(8, 2);
    Completion done;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, done));
    uint64_t t0 = doorbell::now_ns();
    while (doorbell::now_ns() - t0 < gap_ns) { /* b is off its core */
        doorbell_iface_progress(pair.a);
    }
    ASSERT_TRUE(pair.wait([&] { return done.count == 1; }));
    EXPECT_GE(doorbell::now_ns() - t0, gap_ns);
    EXPECT_EQ(data, target.bytes);
    EXPECT_GT(g_log.rtt_samples, 0u);
    EXPECT_LT(g_log.max_rtt, gap_ns / 3) << "the responder's 30 ms off its core is no queue";
    EXPECT_LT(static_cast<UdpQp &>(*static_cast<doorbell::QpCore *>(pair.qa)).srtt_ns, gap_ns / 3);
}

/* A paced QP whose pacer holds packets behind the one it sends asks for an
 * ACK at least every half round trip: its pacer updates on what ACKs tell
 * it, and an ACK nobody asks for may be held for the whole ACK delay. A
 * packet with nothing behind it (a ping-pong's) and an unpaced QP's ask for
 * none. */
TEST(UdpPacing, APacedQpWithABacklogAsksForItsFeedback)
{
    doorbell_iface_params_t p = gated(steady_params(), true);
    LoopbackPair            pair(p, p);
    RawPeer                 peer;
    doorbell_qp_t          *qp = peer.connect_from(pair.a);
    ASSERT_NE(nullptr, qp);
    uint64_t v         = 7;
    auto     next_flag = [&] {
        auto        d = peer.next(pair.a);
        ParseResult r = parse(d.data(), d.size());
        EXPECT_EQ(ParseStatus::kOk, r.status);
        return r.header.flags & kFlagAckReq;
    };
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(qp, &v, 8, 0x1000, 0x55));
    EXPECT_EQ(0, next_flag()) << "unpaced: nobody waits on it";

    g_log.open = false; /* the pacer holds the next puts: the QP is paced */
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(qp, &v, 8, 0x1000, 0x55));
    }
    doorbell_iface_progress(pair.a);
    EXPECT_GT(pair.counters(pair.a).paced_waits, 0u);
    g_log.open = true;
    EXPECT_NE(0, next_flag()) << "paced with two behind it: ask";
    EXPECT_NE(0, next_flag()) << "one behind it, and no round trip known yet: ask again";
    EXPECT_EQ(0, next_flag()) << "the last: nothing behind it";
    doorbell_qp_destroy(qp); /* nobody ACKs */
}

/* A paced QP's read requests ask for no ACK, backlog or not: the
 * responses echo each request's stamp and carry the path's marks, so they
 * are the pacer's feedback, and an ACK on top of them was one more
 * datagram per read piece on the loaded direction (0.97-0.98x of kernel
 * TCP's bulk rate across the emulated spine, 0.99-1.0x without). The
 * read's last piece still asks: a signaled WQE ends there. */
TEST(UdpPacing, APacedQpsReadRequestsAskForNoAck)
{
    doorbell_iface_params_t p = gated(steady_params(), true);
    LoopbackPair            pair(p, p);
    RawPeer                 peer;
    doorbell_qp_t          *qp = peer.connect_from(pair.a);
    ASSERT_NE(nullptr, qp);
    const size_t         len = size_t(4) * 4 * g_log.ctx.mtu; /* 4 pieces or more */
    std::vector<uint8_t> dest(len);
    iovec                iov{dest.data(), len};
    Completion           c;
    g_log.open = false; /* the pacer holds the pieces: the QP is paced */
    ASSERT_EQ(DOORBELL_INPROGRESS, doorbell_qp_get_zcopy(qp, &iov, 1, 0x1000, 0x55, &c));
    doorbell_iface_progress(pair.a);
    EXPECT_GT(pair.counters(pair.a).paced_waits, 0u);
    g_log.open   = true;
    int requests = 0;
    for (int i = 0; i < 3; ++i) {
        auto        d = peer.next(pair.a);
        ParseResult r = parse(d.data(), d.size());
        ASSERT_EQ(ParseStatus::kOk, r.status);
        ASSERT_EQ(Opcode::kReadReq, Opcode(r.header.opcode));
        EXPECT_EQ(0, r.header.flags & kFlagAckReq) << "piece " << i << " with more behind it";
        ++requests;
    }
    EXPECT_EQ(3, requests);
    doorbell_qp_destroy(qp); /* nobody answers */
}

/* CE marks are read (IP_RECVTOS) once bulk data arrives, not for a
 * latency-bound exchange of small packets: its control message costs a
 * fifth of an 8-byte round trip on lo. The sender marks its own packets CE
 * through its socket's TOS byte, as a switch would on the way. */
TEST(UdpPacing, CeIsReadOnceBulkDataArrives)
{
    LoopbackPair pair(lo_params(), lo_params());
    auto        &a  = *static_cast<UdpIface *>(pair.a);
    auto        &b  = *static_cast<UdpIface *>(pair.b);
    int          ce = 0x03;
    ASSERT_EQ(0, setsockopt(a.socket_fd(), IPPROTO_IP, IP_TOS, &ce, sizeof(ce)));
    Region target(pair.pd, 64 << 10, DOORBELL_ACCESS_REMOTE_WRITE);
    for (uint64_t v = 1; v <= 20; ++v) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
        ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    }
    EXPECT_FALSE(b.reads_ce());
    EXPECT_EQ(0u, pair.counters(pair.b).ce_marks);

    auto       data = pattern(16 << 10, 7); /* bulk: segments of kilobytes */
    Completion c;
    ASSERT_EQ(DOORBELL_INPROGRESS, put_zcopy(pair.qa, data, target, c));
    ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
    EXPECT_TRUE(b.reads_ce());
    uint64_t v = 21; /* marked, and now read */
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_GT(pair.counters(pair.b).ce_marks, 0u);
    EXPECT_TRUE(std::equal(data.begin() + 8, data.end(), target.bytes.begin() + 8));
}

/* A stream of small datagrams that queue up at the receiver turns CE
 * reading on as well (kCeQueuedDatagrams found by one receive). */
TEST(UdpPacing, CeIsReadOnceSmallDatagramsQueueUp)
{
    LoopbackPair pair(lo_params(), lo_params());
    auto        &b = *static_cast<UdpIface *>(pair.b);
    Region       target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    for (uint64_t v = 1; v <= 2 * kCeQueuedDatagrams; ++v) {
        ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    }
    /* a rang them out before b looks: they wait in b's socket together */
    doorbell_iface_progress(pair.a);
    EXPECT_FALSE(b.reads_ce());
    ASSERT_EQ(DOORBELL_OK, pair.flush(pair.qa));
    EXPECT_TRUE(b.reads_ce());
    EXPECT_EQ(2 * kCeQueuedDatagrams, *reinterpret_cast<uint64_t *>(target.bytes.data()));
}

/* "auto" paces a network device with IBRC and leaves a loopback device
 * unpaced: there the window is the only thing between the peers. */
TEST(UdpPacing, AutoPacesNetworkDevicesAndNotLoopback)
{
    doorbell_iface_params_t p = lo_params();
    p.cc                      = "auto";
    LoopbackPair pair(p, p);
    EXPECT_EQ("none", static_cast<UdpIface *>(pair.a)->pacing_policy());
    p.cc = "ibrc";
    LoopbackPair paced(p, p);
    EXPECT_EQ("ibrc", static_cast<UdpIface *>(paced.a)->pacing_policy());
}

TEST(UdpPacing, UnknownPolicyIsRefused)
{
    /* not run unpaced in silence: the iface does not open, and says why */
    g_log                     = {};
    doorbell_iface_params_t p = lo_params();
    p.cc                      = "no-such-policy";
    doorbell_pd_t    *pd;
    doorbell_iface_t *iface = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &iface));
    EXPECT_NE(std::string(doorbell_last_error()).find("CC = no-such-policy"), std::string::npos)
        << doorbell_last_error();
    EXPECT_EQ(0, g_log.gates);
    doorbell_pd_destroy(pd);
}

/* A deferred ACK waits up to rto_min/8 at the receiver. The retransmit timer
 * must cover that wait, but the pacer must not read it as queueing: the ACK
 * carries how long the receiver held it and the pacer's sample excludes it.
 * The receiver holds a deferred ACK at least ack_delay, so whatever the
 * scheduling, sample <= (whole exchange) - ack_delay. */
TEST(UdpPacing, RttSampleExcludesTheReceiversAckDelay)
{
    doorbell_iface_params_t p = gated(steady_params(), true);
    p.rto_min_ns              = 80000000; /* 80 ms: ack_delay 10 ms */
    const uint64_t ack_delay  = p.rto_min_ns / 8;
    LoopbackPair   pair(p, p);
    Region         target(pair.pd, 8, DOORBELL_ACCESS_REMOTE_WRITE);
    uint64_t       v     = 7;
    uint64_t       start = doorbell::now_ns();
    ASSERT_EQ(DOORBELL_OK, doorbell_qp_put_short(pair.qa, &v, 8, target.addr(), target.rkey));
    ASSERT_TRUE(pair.wait([&] { return g_log.rtt_samples > 0; }));
    uint64_t whole = doorbell::now_ns() - start;
    EXPECT_EQ(v, *reinterpret_cast<uint64_t *>(target.bytes.data()));
    ASSERT_GE(whole, ack_delay); /* the ACK was deferred, not asked for */
    EXPECT_LE(g_log.max_rtt, whole - ack_delay);
}

TEST(UdpPacing, BadGainFailsAtOpen)
{
    doorbell_pd_t *pd = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    doorbell_iface_t *i = nullptr;
    auto              p = paced("ibrc", -3);
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &i));
    EXPECT_NE(std::string(doorbell_last_error()).find("IBRC_GAIN = -3 is out of range"),
              std::string::npos)
        << doorbell_last_error();
    doorbell_pd_destroy(pd);
}

TEST(UdpPacing, IbrcGateSeesTheTraffic)
{
    PacingFactory ibrc = find_pacing_policy("ibrc");
    ASSERT_TRUE(ibrc);
    g_record = Record{};
    register_pacing_policy("ibrc-recorded", [ibrc](const PacingContext &ctx) {
        PacingContext c = ctx;
        c.policy        = "ibrc";
        return std::unique_ptr<PacingGate>(new RecordingGate(ibrc(c), &g_record));
    });
    {
        LoopbackPair pair(paced("ibrc-recorded"), paced("ibrc-recorded"));
        const size_t len = 4 << 20;
        Region       target(pair.pd, len, DOORBELL_ACCESS_REMOTE_WRITE);
        auto         data = pattern(len, 11);
        iovec        iov{data.data(), len};
        Completion   c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
        EXPECT_EQ(DOORBELL_OK, c.status);
        EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), len));
        doorbell_counters_t ca = pair.counters(pair.a);
        /* every packet but the probes of an idle tail (a slow host's gap of
         * two round trips) and keepalives passed the gate */
        EXPECT_EQ(g_record.sends, ca.tx_packets - ca.tail_probes - ca.keepalives);
        EXPECT_GE(g_record.sent_bytes, len);
    }
    EXPECT_GE(g_record.asks, g_record.sends);
    EXPECT_GT(g_record.acks, 0u);
    EXPECT_GT(g_record.rtts, 0u);
    // IBRC starts at 1/16 of the iface's line rate and never leaves [floor, line].
    EXPECT_GT(g_record.min_rate, 0);
    EXPECT_LE(g_record.max_rate, 10e9);
}

TEST(UdpPacing, BadRatesOrTargetFailAtOpen)
{
    doorbell_pd_t *pd = nullptr;
    ASSERT_EQ(DOORBELL_OK, doorbell_pd_create(&pd));
    doorbell_iface_t *i = nullptr;
    auto              p = paced("ibrc");
    p.cc_min_rate       = 2e6;
    p.cc_max_rate       = 1e6;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &i));
    EXPECT_NE(std::string(doorbell_last_error()).find("CC_MIN_RATE = 2e+06 B/s is out of range"),
              std::string::npos)
        << doorbell_last_error();
    p                    = paced("ibrc");
    p.cc_target_delay_ns = 2000000000ull;
    EXPECT_EQ(DOORBELL_ERR_INVALID_PARAM, doorbell_iface_open(pd, &p, &i));
    EXPECT_NE(std::string(doorbell_last_error()).find("CC_TARGET_DELAY = 2 s is out of range"),
              std::string::npos)
        << doorbell_last_error();
    doorbell_pd_destroy(pd);
}

TEST(UdpPacing, RateBoundsAndTargetReachTheController)
{
    PacingFactory ibrc = find_pacing_policy("ibrc");
    ASSERT_TRUE(ibrc);
    g_record = Record{};
    PacingContext seen;
    register_pacing_policy("ibrc-bounded", [ibrc, &seen](const PacingContext &ctx) {
        seen            = ctx;
        PacingContext c = ctx;
        c.policy        = "ibrc";
        return std::unique_ptr<PacingGate>(new RecordingGate(ibrc(c), &g_record));
    });
    auto p               = paced("ibrc-bounded");
    p.cc_target_delay_ns = 300000;
    p.cc_min_rate        = 1e6;
    p.cc_max_rate        = 40e6;
    {
        LoopbackPair pair(p, p);
        const size_t len = 1 << 20;
        Region       target(pair.pd, len, DOORBELL_ACCESS_REMOTE_WRITE);
        auto         data = pattern(len, 12);
        iovec        iov{data.data(), len};
        Completion   c;
        ASSERT_EQ(DOORBELL_INPROGRESS,
                  doorbell_qp_put_zcopy(pair.qa, &iov, 1, target.addr(), target.rkey, &c));
        ASSERT_TRUE(pair.wait([&] { return c.count == 1; }));
        EXPECT_EQ(0, std::memcmp(target.bytes.data(), data.data(), len));
    }
    EXPECT_EQ(300000u, seen.target_delay_ns);
    EXPECT_EQ(1e6, seen.min_rate);
    EXPECT_EQ(40e6, seen.max_rate);
    EXPECT_GE(g_record.min_rate, 1e6);
    EXPECT_LE(g_record.max_rate, 40e6);
}
