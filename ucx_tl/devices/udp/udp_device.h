/*
 * The UDP device: a software RDMA NIC over one UDP socket per iface.
 *
 * Connections (udp_connection.cc): a QP connects to a peer iface with a
 * handshake bound to the peer's iface token (CONNECT / ACCEPT, wire.h); the
 * peer keeps a Responder for it, reached by its QP number and accepting only
 * packets with the connection's token, from the QP's address and port, at
 * the PSN it expects from a random initial one. Nothing a stranger sends
 * creates state: the responder table grows only by authenticated
 * handshakes and shrinks by DISCONNECT or a peer's restart. An idle
 * connection is kept alive by probes; a silent peer fails the QP.
 *
 * Requester side (UdpQp): consumes the send ring between its cursor and the
 * doorbell, cuts WQEs into packets (segments of at most mtu payload bytes),
 * keeps every unacknowledged packet, and resends go-back-N on a NAK; a
 * retransmit timeout resends only the oldest packet (exponential backoff)
 * and goes back N only once the peer's answer shows what is missing. Reads are requested in
 * pieces (READ_REQ) whose responses are tracked per chunk; a piece whose data
 * does not arrive is requested again (kFlagRetry) and the responder re-reads.
 *
 * Responder side (Responder): one per connection; accepts requests strictly
 * in PSN order, checks every remote access against the protection domain,
 * delivers active messages (reassembling those of several packets within a
 * per-iface memory bound), and answers with cumulative ACKs (timestamp and
 * CE echo) or NAKs.
 *
 * Multipath: an iface sends from `paths` sockets on consecutive ports (the
 * first is its address), so that a fabric's ECMP hash (which includes the
 * source port) offers a connection several paths; each side tells the other
 * its count in the handshake, and accepts a connection's packets from any
 * of the peer's ports. A connection sends from one port, its home, probes
 * the others with a few stamped packets, and moves when a probe finds an
 * empty path or the home loses a packet (udp_paths.h): one path per
 * connection, away from another's. Where the fabric answers an expired TTL,
 * each connection learns which spine each of its ports reaches and sends
 * its packets on the spines in turn (udp_path_classes.h): every connection
 * then loads every spine alike. Packets that overtake each other on
 * different paths (a probe, a move, the spines in turn) are held (a copy, bounded per
 * connection and per iface) and executed in PSN order when the gap fills;
 * a gap that stays open for kReorderWaitNs is NAKed as a loss.
 *
 * Files: udp_device.cc (the iface's set-up: devices, socket, QPs, wake-up),
 * udp_connection.cc, udp_requester.cc, udp_responder.cc, udp_atomic.cc
 * (atomics at both ends and the responder's answer cache), udp_socket_io.cc
 * (progress, receive, staging and sendmmsg), udp_gso.cc (runs of packets to
 * one peer as one UDP_SEGMENT super-datagram), udp_ride_ack.cc (ACKs carried
 * by requests going the other way), udp_reorder.cc (requests held until
 * the gap before them fills), udp_path_probe.cc (the probes that tell the
 * ports apart by spine, and their ICMP answers).
 */
#pragma once

#include "core/iface_core.h"
#include "fault_injector.h"
#include "pacing/pacing_gate.h"
#include "parser.h"
#include "udp_gro.h"
#include "udp_gso.h"
#include "udp_path_classes.h"
#include "udp_paths.h"
#include "udp_return_trip.h"
#include "wire.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace doorbell::udp {

static constexpr unsigned kTxBatch           = 64;              ///< packets per sendmmsg
static constexpr unsigned kRxBatch           = 64;              ///< datagrams per recvmmsg
static constexpr unsigned kRxRounds          = 8;               ///< recvmmsg calls per progress
static constexpr size_t   kBufSize           = 65536;           ///< receive / AM buffer bytes
static constexpr size_t   kMaxShort          = 1024;            ///< put_short / am_short bytes
static constexpr size_t   kMaxZcopy          = size_t(1) << 30; ///< put/get bytes
static constexpr size_t   kMaxResponders     = 65536;           ///< connections per iface
static constexpr uint32_t kAckEvery          = 32;              ///< packets per ACK without ACK_REQ
static constexpr uint32_t kReadPieceSegments = 4;               ///< paced read piece, chunks
/// Floor of the pacer's automatic queueing-delay target, ns. The path of a
/// software NIC runs through kernel stacks (and, on an emulated fabric,
/// forwarding namespaces) whose scheduling adds tens to hundreds of us
/// without any queue; a target below that noise would read it as congestion
/// and hold every flow at its floor. Not far above it either: with the
/// fairness term a flow at its share aims at up to 2.3 targets, and 500 us
/// put that (1.2 ms) above the emulated switch's ECN threshold (20 KiB at
/// 200 Mb/s, 0.8 ms), so delay control and marks fought.
static constexpr uint64_t kHostPathDelayNs = 200000;
/// IBRC around its law on a host path (pacing::Config; the fabric's defaults
/// are 1, 0.5, 0). A flow here paced at a few MB/s sends a handful of packets
/// per loop time, and the kernel and the emulated switches forward them in
/// bursts: cutting by one loop time's marked fraction halved a flow whenever
/// a burst marked its whole window, and the flows swung between 0.6 and
/// 36 MB/s. So marks are smoothed over loop times as DCTCP does (weight
/// 1/16), a marked loop time cuts by a quarter of the estimate, and an empty
/// queue is probed by at least 1/512 of the ceiling per loop time, the same
/// step for every flow, so that small flows catch up (docs/pacing.md).
static constexpr double kHostCeGain    = 1.0 / 16;
static constexpr double kHostCeBeta    = 0.25;
static constexpr double kHostProbeStep = 1.0 / 512;
/// A message that begins on a QP with nothing in flight leaves unpaced up to
/// this many segments (pacing::Pacer::on_idle_message()): a ping-pong's
/// 32 KiB across the emulated fabric's spine took 3.9 ms paced with 4 ranks
/// on 2 cores and 1.1 ms unpaced. 24 segments (35 KiB) fit under the
/// emulated switch's 150 KiB buffer three times over.
static constexpr uint32_t kHostIdleBurstSegments = 24;
/// On a path with no spine between (a peer under the same leaf, which a
/// spine probe of the peer that reached us shows: near_path()), the pacer's
/// bucket holds this much time at the rate, up to kHostIdleBurstSegments
/// segments: such a QP ran at 63-517 MB/s and waited on its pacer 30000
/// times a 4 x 1 allreduce job of 120 calls at 128 KiB, two segments at a
/// time while its process shared a core. At the 25 MB/s of a spine link it
/// would be 8 segments, which lost on 2 x 2: only near paths get it.
static constexpr uint64_t kHostNearBurstNs = 500000;
/// A QP's rate never falls below this many segments per round trip
/// (pacing::Config::min_window_segments), as TCP's window never falls below
/// one segment: paced at the ceiling / 2048 (0.6 MB/s) under others' idle
/// bursts, a 4 x 1 allreduce's 64 KiB cross-spine steps took 100 ms each.
static constexpr uint32_t kHostMinWindowSegments = 1;
/// Shortest tail-loss probe timeout, ns (a probe is one header-only packet).
static constexpr uint64_t kTlpMinNs = 1000000;
/// A paced QP stamps one segment or pack in this many (its pacer takes the
/// samples of a loop time together); an unpaced one, one per round trip.
static constexpr uint32_t kStampEvery     = 4;
static constexpr unsigned kEpollIdlePolls = 64; ///< progress calls without
                                                ///< arm before the socket
                                                ///< leaves the wake-up set
static constexpr uint32_t kPlaceMin = 8192;     ///< MTU from which read data is
                                                ///< received in place (a peek
                                                ///< per datagram beats a copy)
/// CE reading (IP_RECVTOS) starts with the first datagram of at least
/// kCeBulkBytes (a segment of bulk data) or the first receive that finds
/// kCeQueuedDatagrams waiting (a stream of small ones): the traffic that
/// builds queues (enable_bulk_receive, which turns GRO on too). Fewer do
/// not tell: a connection's set-up messages, or an ACK beside a reply,
/// arrive in twos and threes.
static constexpr size_t   kCeBulkBytes       = 1024;
static constexpr unsigned kCeQueuedDatagrams = 8;
static constexpr size_t   kLinearTx          = 1024; ///< payload bytes a lone packet
                                                     ///< is copied behind its header
static_assert(kBufSize >= kMaxDatagram + kRxLead + 256, "datagram fits a buffer");
static_assert(DOORBELL_MAX_SEG_SIZE + 64 <= kBufSize, "an AM fits a receive buffer");
static_assert(DOORBELL_MAX_MTU + 64 <= kMaxDatagram, "a packet fits a datagram");
static constexpr size_t kNoSlot = ~size_t(0); ///< a datagram not in a receive slot
/// Control bytes per receive: TOS, timestamp and UDP_GRO messages (24 + 32 +
/// 24, CMSG_SPACE each).
static constexpr size_t kRxControlBytes = 128;
/// PSNs further than this from the one expected are outside any window a
/// requester can have: dropped without an answer.
static constexpr int32_t kPsnWindow = 1 << 23;
/// A connection whose peer sends over several paths holds requests that
/// arrive ahead of a gap until its socket has been found empty this long
/// after the gap opened, then NAKs the gap as a loss: the paths' delays
/// differ by their queues, and the emulated fabric's spine queue at its ECN
/// threshold (30 KiB at 200 Mb/s) is 1.2 ms.
static constexpr uint64_t kReorderWaitNs     = 2000000;
static constexpr uint32_t kReorderMaxPackets = 256;      ///< held per connection
static constexpr uint64_t kReorderMaxBytes   = 16 << 20; ///< held per iface

/// Whether two addresses are the same peer socket.
inline bool same_peer(const sockaddr_in &a, const sockaddr_in &b)
{
    return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

/// Whether `from` is one of the sockets of a peer iface at `peer` that
/// sends from `ports` consecutive ports (multipath: its steered and spare
/// ports).
inline bool from_peer(const sockaddr_in &peer, uint32_t ports, const sockaddr_in &from)
{
    return from.sin_addr.s_addr == peer.sin_addr.s_addr &&
           uint16_t(ntohs(from.sin_port) - ntohs(peer.sin_port)) < ports;
}

/// The spare ports an iface of `paths` steered ports binds right after
/// them: as many again, within DOORBELL_MAX_PATHS; none for one port. Only
/// a connection whose steered ports all reach one spine sends from them
/// (udp_path_classes.h), so the steering (udp_paths.h) never sees them.
inline uint32_t spare_ports(uint32_t paths)
{
    return paths <= 1 ? 0 : std::min<uint32_t>(paths, DOORBELL_MAX_PATHS - paths);
}

/// A socket message of one buffer to or from `addr`, with room for control
/// messages where `ctl` is given.
inline msghdr one_iov_msg(sockaddr_in &addr, iovec &iov, void *ctl = nullptr, size_t ctl_len = 0)
{
    msghdr m{};
    m.msg_name       = &addr;
    m.msg_namelen    = sizeof(addr);
    m.msg_iov        = &iov;
    m.msg_iovlen     = 1;
    m.msg_control    = ctl;
    m.msg_controllen = ctl_len;
    return m;
}

/// One packet a requester sent (or will send) and the peer has not ACKed.
/// The cause a NAK(ACCESS) carries for the protection domain's verdict.
inline NakCause access_cause(AccessDenial why)
{
    static_assert(uint8_t(AccessDenial::kUnknownKey) == uint8_t(NakCause::kUnknownKey) &&
                      uint8_t(AccessDenial::kOutOfRange) == uint8_t(NakCause::kOutOfRange) &&
                      uint8_t(AccessDenial::kNotGranted) == uint8_t(NakCause::kNotGranted),
                  "the domain's verdicts are the first causes");
    return NakCause(why);
}

struct TxPacket {
    uint32_t psn;
    Opcode   opcode;
    uint8_t  flags;
    uint64_t wqe;                               ///< ring index of its WQE
    uint32_t offset;                            ///< message offset (READ_REQ: offset of the piece)
    uint32_t length;                            ///< payload bytes (READ_REQ: bytes requested)
    uint32_t header_bytes = sizeof(WireHeader); ///< on the wire (a SegHeader's
                                                ///< in a message of several)
    bool     stamped = false;                   ///< a segment that carries ts_send
    uint64_t sent_ns = 0;                       ///< when it first left
};

/// Completion tracking of one WQE the device has started.
struct WqeTrack {
    uint64_t wqe;
    uint32_t last_psn;       ///< PSN of its last packet so far
    uint32_t reads_left = 0; ///< READ pieces whose data is incomplete
    bool     packetized = false;
    bool     is_send    = false;
};

/// One READ_REQ piece whose response data is still arriving, or an
/// ATOMIC_REQ whose answer is (atomic: length is the word's size, dest the
/// caller's result or null, one chunk). Atomics wait here beside reads: a
/// fence waits for them, and an answer lost after its ACK is asked for again.
struct ReadPiece {
    uint32_t          psn;
    uint64_t          wqe;
    uint64_t          remote_addr;
    uint32_t          rkey;
    uint32_t          length;
    uint32_t          chunk; ///< response payload bytes per datagram
    uint8_t          *dest;
    std::vector<bool> got;     ///< per chunk
    uint32_t          missing; ///< chunks not yet received
    bool              atomic  = false;
    uint64_t          sent_ns = 0; ///< when its request first left
};

class UdpIface;

/// The UDP iface address: the port, then the iface's token.
struct [[gnu::packed]] IfaceAddress {
    uint16_t port;  ///< network byte order
    uint64_t token; ///< the secret a CONNECT must carry
};
static_assert(sizeof(IfaceAddress) == 10);

struct UdpQp : public QpCore {
    UdpQp(UdpIface &iface, uint32_t qpn, const sockaddr_in &peer, uint64_t peer_token);

    sockaddr_in peer;
    /* connection (udp_connection.cc) */
    const uint64_t peer_token;            ///< the peer iface's token (its address)
    const uint64_t token;                 ///< this connection's, in every packet
    const uint32_t isn;                   ///< initial PSN (random)
    uint32_t       remote_qpn    = 0;     ///< the peer's QP for it (ACCEPT)
    bool           connected     = false; ///< ACCEPT arrived
    uint32_t       connect_tries = 0;     ///< CONNECTs sent
    uint64_t       last_heard_ns = 0;     ///< the peer's last packet
    uint64_t       ka_next_ns    = 0;     ///< next keepalive probe; 0: none
    uint64_t       ka_since_ns   = 0;     ///< first unanswered probe; 0: none
    ConnectPayload hello{};               ///< what a CONNECT carries (staged by
                                          ///< reference until the send)
    /* packetizer */
    uint64_t cursor        = 0; ///< next WQE to cut
    uint32_t cursor_offset = 0; ///< bytes of it already cut
    /* reliability */
    uint32_t              next_psn; ///< PSN of the next new packet
    uint32_t              una;      ///< oldest unacknowledged PSN
    uint32_t              tx_psn;   ///< next PSN to (re)send
    uint32_t              max_sent; ///< PSNs below were sent once
    std::deque<TxPacket>  unacked;  ///< PSNs [una, next_psn)
    std::deque<WqeTrack>  tracks;   ///< WQEs [done, cursor]
    std::deque<ReadPiece> reads;    ///< in PSN order
    uint64_t              inflight_bytes = 0;
    uint64_t              read_bytes     = 0;
    uint64_t              rto_ns;
    uint64_t              deadline_ns   = 0; ///< 0: timer not armed
    uint64_t              hold_until_ns = 0; ///< receiver busy: wait
    uint32_t              retries       = 0;
    uint64_t              srtt_ns       = 0;
    /* timeout recovery: the timer resent only the oldest packet; the
     * backed-off timeout holds until everything sent before it is ACKed */
    bool                                recovering  = false;
    uint32_t                            recover_psn = 0;     ///< max_sent at the timeout
    uint64_t                            recover_ts  = 0;     ///< ts_send of that resend
    uint32_t                            recover_one = 0;     ///< PSN of that resend
    bool                                probe_due   = false; ///< ask the peer to ACK
    uint32_t                            probed_psn;          ///< next_psn when last asked
    std::unique_ptr<pacing::PacingGate> gate;
    /* per-QP counters, printed at destroy with the iface's stats */
    uint64_t    paced_waits  = 0;
    uint64_t    timeouts     = 0;
    uint64_t    busy_naks    = 0;
    uint64_t    tail_probes  = 0;
    uint64_t    tlp_at_ns    = 0;     ///< tail-loss probe due; 0: none
    bool        last_ack_req = false; ///< the last packet asked for an ACK
    uint64_t    stamp_ns     = 0;     ///< when a packet last carried its ts_send
    uint32_t    unstamped    = 0;     ///< packets since (of those that may go without)
    uint64_t    last_echo    = 0;     ///< the ts_echo of the last RTT sample taken
    uint64_t    newest_acked = 0;     ///< first send of the newest packet acknowledged
    uint64_t    ack_req_ns   = 0;     ///< when a packet last asked for an ACK
    bool        paced        = false; ///< the pacer has limited it
    double      min_rate     = 0;     ///< lowest pacer rate seen, B/s
    uint64_t    last_tx_ns   = 0;     ///< when it last sent a request packet
    uint32_t    idle_psn     = 0;     ///< the message start last announced idle
    bool        idle_told    = false; ///< (idle_psn is valid)
    bool        window_open  = false; ///< an idle window is open (grant_window())
    bool        window_given = false; ///< it has had its grant
    bool        window_left  = false; ///< grant_window() gave it, maybe unspent
    uint32_t    window_sent  = 0;     ///< bytes it sent (path bytes)
    bool        backlog      = false; ///< the last transmit left work behind
    uint32_t    peer_paths   = 1;     ///< the peer's steered ports (ACCEPT)
    uint32_t    peer_ports   = 1;     ///< those and its spare ones (ACCEPT)
    PathTable   path;                 ///< which of our ports the next packet takes
    PathTable   peer_path;            ///< the peer's ports, as its read responses show
    PathClasses classes;              ///< which of our ports reach which spine
    bool        near = false;         ///< a spine probe of the peer reached us
                                      ///< (near_path()): no spine between

    /* the queue its answers meet on their way back (forward_rtt()) */
    ReturnTrip back;
    uint32_t   reverse_id      = 0; ///< the responder of the peer's QP to us (data_from())
    uint64_t   reverse_look_ns = 0; ///< when data_from() may look for it again
};

/// A request that arrived ahead of a gap (multipath), kept until its turn.
struct HeldRequest {
    WireHeader                 h;
    std::unique_ptr<uint8_t[]> payload; ///< h.length bytes
    bool                       ce    = false;
    uint64_t                   rx_ns = 0; ///< when it could first be taken
};

/// The answers of a peer QP's last atomics, by PSN (an InfiniBand RC
/// responder's atomic cache): a repeated ATOMIC_REQ is answered from here and
/// never executed twice. A requester keeps at most
/// DOORBELL_MAX_ATOMICS_INFLIGHT atomics incomplete and completes them in
/// order, so any atomic it may still ask again is among the last that many
/// executed.
struct AtomicCache {
    static constexpr unsigned kSize = DOORBELL_MAX_ATOMICS_INFLIGHT;
    struct Answer {
        uint32_t psn;
        uint32_t size; ///< 0: empty
        uint64_t value;
    };
    std::array<Answer, kSize> answers{};
    unsigned                  next = 0; ///< the oldest, overwritten next
};

/// The responder's state of one connection (a peer's requester QP).
struct Responder {
    uint64_t    token;                          ///< the connection's token
    uint32_t    id;                             ///< our QP number for it (dst_qp of requests)
    uint32_t    qpn;                            ///< the requester's QP
    uint64_t    peer_iface_token;               ///< the requester's iface (CONNECT)
    sockaddr_in peer;                           ///< the requester's address and port
    uint32_t    isn;                            ///< its initial PSN (ACCEPT echoes it)
    uint32_t    expected;                       ///< next PSN accepted
    uint64_t    accept_ts    = 0;               ///< ts_send of the CONNECT answered
    bool        nak_sent     = false;           ///< a NAK for the current gap went out
    bool        failed       = false;           ///< an access error: ignore the rest
    NakCause    fail_cause   = NakCause::kNone; ///< the verdict, repeated
    bool        ack_due      = false;
    bool        ack_deferred = false; ///< an ACK waits for ack_deadline
    uint64_t    ack_deadline = 0;
    uint32_t    unacked_pkts = 0;       ///< accepted since the last ACK
    uint64_t    last_seen    = 0;       ///< ns, for eviction when full
    uint64_t    data_ns      = 0;       ///< ns when a request with payload last came
    uint64_t    ts_echo      = 0;       ///< ts_send of the last packet
    uint64_t    ts_echo_rx   = 0;       ///< ns when that packet was processed
    uint32_t    ce_bytes     = 0;       ///< CE-marked bytes since the last ACK
    bool        last_ce      = false;   ///< CE state of the last packet accepted
    uint8_t    *am_buf       = nullptr; ///< AM being reassembled (its own
                                        ///< allocation, header room first)
    uint32_t am_alloc   = 0;            ///< bytes of that allocation
    uint32_t am_length  = 0;            ///< bytes of the message so far
    uint64_t am_last_ns = 0;            ///< its last segment's arrival
    /* the WRITE whose segments are arriving: a segment after the FIRST
     * names neither its target nor its offset */
    bool                         wr_open   = false;
    uint64_t                     wr_addr   = 0;
    uint32_t                     wr_rkey   = 0;
    uint32_t                     wr_length = 0; ///< the message's bytes
    uint32_t                     wr_done   = 0; ///< of them, written
    std::unique_ptr<AtomicCache> atomics;       ///< made by the first atomic
    /* multipath (udp_reorder.cc) */
    uint32_t         peer_paths = 1; ///< the requester's steered ports (CONNECT)
    uint32_t         peer_ports = 1; ///< those and its spare ones (CONNECT)
    mutable uint32_t path_next  = 0; ///< our port of the next answer, mod paths
    mutable uint32_t first_next = 0; ///< the same, for first read responses
    /// our QP to the requester's iface that knows the spines (0: none yet),
    /// and when to look again if none
    mutable uint32_t                          spines_qpn     = 0;
    mutable uint64_t                          spines_look_ns = 0;
    std::unordered_map<uint32_t, HeldRequest> held;        ///< by PSN, ahead of expected
    uint32_t                                  gap_psn = 0; ///< the PSN missing since gap_since_ns
    uint64_t                                  gap_since_ns = 0; ///< 0: no gap watched
    bool gap_probed = false; ///< a probe from beyond it came (nothing held)
};

/// Whether an owed ACK rides on a request to its peer now: one that is due
/// (someone waits on it), or a deferred one (nobody does) that has waited a
/// quarter of the ACK delay or holds half of kAckEvery packets. A younger
/// one waits for a later request or its deadline: on a link that forwards
/// bytes, its RideAck on every reply of a ping-pong cost more of an 8-byte
/// MPI message's time than the message; at half of kAckEvery it rides before
/// the count makes it due, and a due ACK that finds no request at the end of
/// its receive batch leaves as a datagram of its own.
inline bool ack_rides_now(const Responder &r, uint64_t now_ns, uint64_t ack_delay_ns)
{
    if (r.ack_due) {
        return true;
    }
    return r.ack_deferred && (r.unacked_pkts >= kAckEvery / 2 ||
                              now_ns + ack_delay_ns >= r.ack_deadline + ack_delay_ns / 4);
}

class UdpIface : public IfaceCore {
public:
    using Qp                                      = UdpQp;
    static constexpr doorbell_device_kind_t kKind = DOORBELL_DEVICE_UDP;

    /// Opens the device named in params (a netdev with an IPv4 address).
    static doorbell_status_t open(ProtectionDomain &pd, const doorbell_iface_params_t &params,
                                  UdpIface **iface_p);
    ~UdpIface();

    /* control path (udp_device.cc) */
    doorbell_status_t create_qp(const void *device_addr, const void *iface_addr, UdpQp **qp_p);
    void              destroy_qp(UdpQp &qp);
    size_t            device_address_length() const { return 4; }
    size_t            address_length() const { return sizeof(IfaceAddress); }
    void              get_device_address(void *addr) const;
    void              get_address(void *addr) const;
    bool              is_reachable(const void *device_addr, const void *iface_addr) const;
    void              query_limits(doorbell_iface_limits_t &limits) const;
    int               event_fd() const { return epoll_fd_; }
    doorbell_status_t arm();
    void              set_faults(const FaultConfig *config);
    void              set_tx_syscall(TxSyscall call) { tx_syscall_ = call ? call : ::sendmmsg; }
    void              set_gso(bool on) { gso_ = on && gso_supported(fd_); }
    /// Ports this iface steers its packets over (multipath), the first its
    /// address's.
    uint32_t paths() const { return paths_; }
    /// Those and the spare ports bound after them (spare_ports()).
    uint32_t ports() const { return ports_; }
    GsoStats gso_stats() const { return {gso_, gso_sends_, gso_segments_, gso_fallbacks_}; }
    void     set_gro(bool on);
    /// Test seam: the bytes a receive may fill (a datagram or merged buffer
    /// beyond them is truncated), at most kBufSize - kRxLead; between
    /// progress calls only.
    void     set_rx_room(size_t bytes);
    GroStats gro_stats() const
    {
        return {rx_gro_, counters.rx_merged, counters.rx_merged_datagrams, gro_truncated_};
    }
    /// A keepalive probe now (doorbell_qp_check).
    doorbell_status_t check_qp(UdpQp &qp);
    /// The connection handshake now, if it has not started (connect_now).
    void start_connect(UdpQp &qp);
    /// Test seam: the connection of a QP as the peer sees it (token, the
    /// peer's QP for it, the next PSN), to forge packets that are right in
    /// all but one respect.
    void connection_of(const UdpQp &qp, uint64_t *token, uint32_t *remote_qpn,
                       uint32_t *next_psn) const;
    /// Test seam: a datagram as if it had arrived from `from`; segment != 0:
    /// a merged buffer (GRO) of datagrams of that size.
    void     inject(const uint8_t *bytes, size_t len, const sockaddr_in &from, size_t segment = 0);
    uint16_t port() const { return ntohs(local_.sin_port); }
    uint32_t payload_mtu() const { return mtu_; }
    /// Payload of a segment of op (the datagram of a full-header packet less
    /// the segment's header); a READ_RESP's, the chunk a READ_REQ asks for,
    /// has room for the FIRST's echo in every chunk.
    uint32_t segment_payload(Opcode op, bool first = false, bool stamped = false) const
    {
        return mtu_ + uint32_t(sizeof(WireHeader)) -
               (op == Opcode::kReadResp ? seg_header_max(op) :
                                          seg_header_bytes(op, first, stamped));
    }
    /// The datagram socket (tests set its TOS byte to send CE-marked packets).
    int socket_fd() const { return fd_; }
    /// Whether CE marks of received datagrams are read (enable_bulk_receive).
    bool reads_ce() const { return rx_ce_; }
    /// The pacing policy in force (doorbell_iface_params_t::cc resolved by
    /// pacing::resolve_pacing_policy).
    const std::string &pacing_policy() const { return cc_; }

    /* data path: udp_requester.cc, udp_responder.cc, udp_socket_io.cc */
    /// The doorbell: WQEs up to the ring's tail become the device's; one
    /// sendmmsg carries what can go now.
    void     ring(UdpQp &qp);
    unsigned progress();
    void     release_am(void *data);

private:
    UdpIface(ProtectionDomain &pd, const doorbell_iface_params_t &params, std::string name);
    doorbell_status_t init(const sockaddr_in &addr, uint32_t if_mtu, bool loopback);
    doorbell_status_t bind_sockets(const sockaddr_in &addr, uint32_t paths);

    /* set-up (udp_device.cc) */
    uint8_t *take_buffer();
    void     give_buffer(uint8_t *buf);
    void     dump_qp(const UdpQp &qp) const;

    /* connections (udp_connection.cc) */
    void       send_connect(UdpQp &qp);
    void       send_disconnect(const UdpQp &qp);
    void       handle_connect(const WireHeader &h, const uint8_t *payload, const sockaddr_in &from);
    void       handle_accept(UdpQp &qp, const WireHeader &h);
    void       send_accept(const Responder &r);
    Responder *admit(const WireHeader &h, const ConnectPayload &c, const sockaddr_in &from);
    void       forget_restarted(const sockaddr_in &from, uint64_t iface_token);
    bool       reclaim_silent();
    void       erase_responder(uint32_t id);
    bool       check_connect(UdpQp &qp);
    bool       check_keepalive(UdpQp &qp);
    void       send_keepalive(UdpQp &qp);
    void       heard(UdpQp &qp);
    void       reap_reassembly(bool pressure);
    void       drop_reassembly(Responder &r);

    /* requester (udp_requester.cc) */
    void     transmit(UdpQp &qp);
    bool     cut_packet(UdpQp &qp);
    void     send_packet(UdpQp &qp, TxPacket &pkt);
    bool     wants_ack(const UdpQp &qp, const TxPacket &pkt, const doorbell_wqe_t &w,
                       bool resend) const;
    void     note_sent(UdpQp &qp, TxPacket &pkt, bool resend, uint32_t bytes);
    void     feed_gate(UdpQp &qp, uint64_t acked, uint64_t ce, uint64_t rtt, uint64_t echo,
                       uint64_t acked_sent);
    bool     stamp_due(const UdpQp &qp) const;
    bool     feedback_due(const UdpQp &qp) const;
    void     note_stamp(UdpQp &qp, bool stamped) const;
    bool     packable(const TxPacket &pkt) const;
    uint32_t pack_limit() const;
    /// kHostIdleBurstSegments full segments on the wire, bytes: a quiet
    /// QP's unscheduled message, and a near QP's deepest bucket
    uint32_t host_burst_bytes() const
    {
        return kHostIdleBurstSegments * (mtu_ + uint32_t(sizeof(WireHeader)));
    }
    void        send_pack(UdpQp &qp);
    void        send_probe(UdpQp &qp, uint32_t psn);
    uint64_t    tlp_timeout(const UdpQp &qp) const;
    void        retire(UdpQp &qp);
    void        check_timer(UdpQp &qp);
    unsigned    rerequest_reads(UdpQp &qp);
    WireHeader  retry_header(const UdpQp &qp, Opcode op, const ReadPiece &piece) const;
    void        mark_paced(UdpQp &qp);
    uint64_t    path_rtt(uint64_t ts_echo, uint32_t hold_ns) const;
    uint64_t    forward_rtt(UdpQp &qp, uint64_t rtt, uint64_t answer_sent);
    bool        data_from(UdpQp &qp, uint64_t since_ns);
    uint32_t    path_bytes(const TxPacket &pkt, uint32_t offset) const;
    bool        quiet(const UdpQp &qp) const;
    bool        little_in_flight(const UdpQp &qp) const;
    bool        grant_window(UdpQp &qp, const TxPacket &pkt);
    uint64_t    read_window(const UdpQp &qp) const;
    uint32_t    read_piece_max(const UdpQp &qp) const;
    void        handle_response(UdpQp &qp, const WireHeader &h, const uint8_t *payload, bool ce);
    void        ack_psn(UdpQp &qp, uint32_t psn, uint64_t now);
    void        handle_ack(UdpQp &qp, const WireHeader &h);
    void        handle_nak(UdpQp &qp, const WireHeader &h);
    void        handle_read_resp(UdpQp &qp, const WireHeader &h, const uint8_t *payload, bool ce);
    static void note_rate(UdpQp &qp)
    {
        double r = qp.gate->rate();
        if (qp.min_rate == 0 || r < qp.min_rate) {
            qp.min_rate = r;
        }
    }

    /* multipath: requests held until the gap before them fills (udp_reorder.cc) */
    bool hold_request(Responder &r, const WireHeader &h, const uint8_t *payload, bool ce);
    void watch_gap(Responder &r);
    void replay_held(uint32_t responder);
    void release_held(Responder &r);
    void check_gaps();
    /// Whether the gap before r's expected PSN is a loss: kReorderWaitNs
    /// after it opened the socket was found empty, or a datagram that
    /// arrived that late (kernel time) is in hand. A receiver that has not
    /// looked at what arrived since does not know, however long ago it
    /// opened (a descheduled one, with everything in its socket).
    bool gap_expired(const Responder &r) const
    {
        uint64_t deadline = r.gap_since_ns + kReorderWaitNs;
        return rx_drained_ns_ >= deadline || (rx_timestamps_ && rx_ts_ >= deadline);
    }
    uint8_t next_path(uint32_t &next) const { return paths_ > 1 ? uint8_t(next++ % paths_) : 0; }

    /* responder (udp_responder.cc) */
    void send_control(const Responder &r, Opcode op, NakCode code, uint32_t psn,
                      NakCause cause = NakCause::kNone);
    void reject(Responder &r, uint32_t psn, NakCause cause);
    void send_ack(Responder &r);
    void acked(Responder &r);
    /* ACKs that ride on requests (udp_ride_ack.cc) */
    bool     owed_ack(const sockaddr_in &to, RideAck &ride);
    void     carry_ack(const sockaddr_in &to);
    void     take_ride(const RideAck &ride, const sockaddr_in &from);
    void     flush_deferred_acks(bool all);
    void     send_read_response(const Responder &r, const WireHeader &h);
    void     handle_request(Responder &r, const WireHeader &h, uint8_t *buf, const uint8_t *payload,
                            bool ce, size_t slot);
    bool     handle_send(Responder &r, const WireHeader &h, uint8_t *buf, const uint8_t *payload,
                         size_t slot);
    NakCause resolve_segment(Responder &r, WireHeader &h);
    void handle_pack(uint32_t responder, const ParseResult &pr, uint8_t *buf, bool ce, size_t slot);

    /* atomics (udp_atomic.cc) */
    std::optional<NakCause> execute_atomic(Responder &r, const WireHeader &h,
                                           const uint8_t *payload);
    bool                    answer_atomic_again(const Responder &r, const WireHeader &h);
    void send_atomic_response(const Responder &r, const WireHeader &req, uint64_t value);
    void handle_atomic_resp(UdpQp &qp, const WireHeader &h);

    /* socket I/O (udp_socket_io.cc) */
    unsigned receive(size_t &bytes);
    int      place_read_response();
    int      receive_batch(unsigned want);
    void     rearm_rx(unsigned count);
    /// later: a datagram after the first of a merged buffer (GRO), which
    /// may have lent the buffer already
    void handle_datagram(uint8_t *buf, size_t len, const sockaddr_in &from, bool ce, size_t slot,
                         bool later = false);
    /// The connection a packet names, its token and its source checked (the
    /// first thing done with any datagram); the drop is counted when there is
    /// none. CONNECT: *qp and *r stay null and the iface token is checked.
    bool     authenticate(const Prefix &p, const sockaddr_in &from, UdpQp **qp, Responder **r);
    void     drop(uint64_t doorbell_counters_t::*reason);
    void     stage(const WireHeader &hdr, const void *a, size_t alen, const void *b, size_t blen,
                   const sockaddr_in &to, uint8_t path = 0, uint32_t header_bytes = sizeof(WireHeader));
    void     flush_tx();
    unsigned stage_batch(unsigned from, uint8_t path); /* udp_socket_io.cc */
    void     send_staged(uint8_t path, unsigned n);
    struct TxSlot;
    void send_linear(const TxSlot &s);
    void enable_rx_timestamps();
    void enable_bulk_receive();
    void receive_merged(unsigned i, size_t len, size_t segment, bool ce);
    void handle_merged(uint8_t *buf, size_t len, size_t segment, const sockaddr_in &from, bool ce,
                       size_t slot);
    uint64_t kernel_rx_time(const cmsghdr *c, int64_t rt_to_mono) const;

    /* ports told apart by spine (udp_path_probe.cc) */
    uint8_t data_path(UdpQp &qp, bool stamped);
    UdpQp  *spines_to(const Responder &r);
    void    probe_classes(UdpQp &qp);
    void    near_path(const Responder &r, const WireHeader &h);
    bool    near_peer(const sockaddr_in &peer) const;
    void    mark_near(UdpQp &qp);
    void    read_path_errors();
    void    read_path_errors(uint8_t path);
    bool    send_again(uint8_t path, unsigned &icmp_tries);
    /// How long after a try the sending ports' error queues are read (ns):
    /// an answer comes a round trip after its probe.
    static constexpr uint64_t kClassWatchNs         = 20000000;
    static constexpr uint64_t kClassReadEveryNs     = 200000;
    uint64_t                  class_watch_until_ns_ = 0;
    uint64_t                  class_read_next_ns_   = 0;
    uint32_t                  class_watch_mask_     = 0; ///< ports probed in the window
    /// peer ifaces whose spine probes reached us (near_path()): no spine
    /// between; one entry per peer iface that holds a connection's token
    std::vector<sockaddr_in> near_peers_;

    int fd_ = -1;
    /// The sockets packets leave from: fd_, then ports_ - 1 more on the
    /// ports after its own (udp_device.cc bind_sockets); the first paths_
    /// are steered over, the rest are spare
    std::array<int, DOORBELL_MAX_PATHS> path_fd_{};
    uint32_t                            paths_      = 1;
    uint32_t                            ports_      = 1;
    uint64_t                            held_bytes_ = 0; ///< payload of HeldRequests
    std::vector<uint32_t>               gapped_;         ///< responders with held requests
    int                                 epoll_fd_        = -1;
    int                                 timer_fd_        = -1;
    bool                                fd_in_epoll_     = false; ///< the socket is in epoll_fd_
    unsigned                            polls_since_arm_ = 0;
    sockaddr_in                         local_{};
    uint32_t                            mtu_    = 0; ///< payload bytes per packet
    uint64_t                            window_ = 0; ///< unacknowledged bytes per QP
    uint64_t                            now_    = 0; ///< clock of the current progress call
    uint64_t                            rx_ts_  = 0; ///< kernel arrival of the datagram in hand
    uint8_t  rx_path_       = 0;     ///< the peer's port a response in hand came from (multipath)
    uint64_t rx_look_end_   = 0;     ///< when the last receive from the socket ended
    uint64_t rx_prev_look_  = 0;     ///< that, for the receive in progress
    uint64_t rx_drained_ns_ = 0;     ///< when a receive last found the socket empty
    bool     rx_timestamps_ = false; ///< SO_TIMESTAMPNS is on
    bool     rx_ce_         = false; ///< IP_RECVTOS is on (CE marks are read)
    uint64_t token_         = 0;     ///< this iface's (its address)
    uint32_t next_qpn_      = 0;
    uint32_t next_rid_      = 0; ///< next responder QP number
    uint64_t reasm_bytes_   = 0; ///< held in half-finished AMs
    uint64_t reap_at_       = 0; ///< next stale-reassembly scan
    unsigned depth_         = 0; ///< nesting of progress (deferred frees)
    std::unordered_map<uint32_t, UdpQp *> qp_by_num_;
    std::vector<std::unique_ptr<UdpQp>>   owned_;
    std::vector<std::unique_ptr<UdpQp>>   graveyard_;

    struct ResponderKey {
        uint32_t ip;
        uint16_t port;
        uint32_t qpn;
        bool     operator==(const ResponderKey &) const = default;
    };
    struct ResponderHash {
        size_t operator()(const ResponderKey &k) const
        {
            return std::hash<uint64_t>()((uint64_t(k.ip) << 16 | k.port) ^ (uint64_t(k.qpn) << 29));
        }
    };
    std::unordered_map<uint32_t, Responder> responders_; ///< by id
    /// (requester address, port, QP) -> responder id: a repeated CONNECT
    /// finds its connection, a new one from the same QP replaces it.
    std::unordered_map<ResponderKey, uint32_t, ResponderHash> conn_index_;
    /// Per requester address and port: the token of the iface there and how
    /// many connections it has (a CONNECT with another token: it restarted).
    struct PeerIface {
        uint64_t token;
        uint32_t connections;
    };
    std::unordered_map<uint64_t, PeerIface> peer_ifaces_;
    static uint64_t                         address_key(const sockaddr_in &a)
    {
        return uint64_t(a.sin_addr.s_addr) << 16 | a.sin_port;
    }
    std::vector<Responder *> ack_list_;
    std::vector<Responder *> deferred_acks_;
    uint64_t                 ack_delay_ = 0; ///< ns an ACK may wait

    /* receive buffers: kRxBatch in the recvmmsg ring, the rest free or held
     * by the AM handler */
    std::vector<uint8_t *>                  rx_slots_;
    std::vector<uint8_t *>                  free_bufs_;
    std::vector<std::unique_ptr<uint8_t[]>> all_bufs_;
    /// AM data lent out, by the pointer the handler got: in a receive
    /// buffer (kBufSize, back to the free list) or in an allocation of its
    /// own (freed)
    struct Held {
        uint8_t *alloc;     ///< the receive buffer, or the allocation
        bool     rx_buffer; ///< alloc is a receive buffer
    };
    std::unordered_map<uint8_t *, Held> held_;
    bool rx_lent_ = false; ///< the datagram in hand: its receive buffer is lent to
                           ///< a handler (what follows in it is not headroom)
    std::array<mmsghdr, kRxBatch>                              rx_msgs_{};
    std::array<iovec, kRxBatch>                                rx_iov_{};
    std::array<sockaddr_in, kRxBatch>                          rx_addr_{};
    std::array<std::array<uint8_t, kRxControlBytes>, kRxBatch> rx_cmsg_{};
    size_t rx_room_ = kBufSize - kRxLead; ///< bytes a receive may fill
    /* GRO (udp_gro.h) */
    bool     rx_gro_        = false; ///< UDP_GRO is on: a receive may hold a run
    bool     gro_allowed_   = true;  ///< false: never turned on (a test's)
    uint64_t gro_truncated_ = 0;
    bool     held_injected_ = false; ///< inject(): the AM handler kept the buffer
    unsigned rx_want_       = 1;     ///< datagrams the next recvmmsg asks for
    unsigned rx_singles_    = 0;     ///< receives in a row that got the one asked for
    /* READ data received in place (place_read_response) */
    bool                 rx_place_  = false;   ///< a read waits for data
    const uint8_t       *rx_placed_ = nullptr; ///< entry 0's payload went here
    WireHeader           rx_placed_header_{};  ///< the header peeked for it
    std::array<iovec, 2> rx_place_iov_{};

    /* transmit staging: one sendmmsg */
    struct TxSlot {
        uint8_t     path; ///< the socket it leaves from (path_fd_)
        WireHeader  hdr;
        RideAck     ride; ///< an ACK carried behind the payload (kFlagRide)
        iovec       iov[3];
        sockaddr_in to;
        unsigned    iovcnt; ///< leading iov entries in use
        size_t      bytes;
    };
    std::array<TxSlot, kTxBatch> tx_{};
    unsigned                     tx_count_ = 0;
    /* the staged slots whose ts_send is the clock of the flush (ACKs and
     * NAKs: send_control), one bit per slot */
    uint64_t tx_stamp_at_send_ = 0;
    static_assert(kTxBatch <= 64, "a bit of tx_stamp_at_send_ per slot");
    /* packs (send_pack): a slot's datagram built whole in its own buffer */
    std::array<std::unique_ptr<uint8_t[]>, kTxBatch> tx_pack_;
    TxSlot &stage_linear(const sockaddr_in &to, uint8_t path, uint8_t **buf);
    std::array<mmsghdr, 2 * kTxBatch> tx_msgs_{};
    /* GSO (udp_gso.h): per message of tx_msgs_, its first slot and the
     * datagrams it carries; a super-datagram's iovecs and control message */
    std::array<unsigned, 2 * kTxBatch>            tx_first_{};
    std::array<unsigned, 2 * kTxBatch>            tx_segs_{};
    std::array<iovec, 3 * kTxBatch>               tx_gso_iov_{};
    std::array<std::array<uint8_t, 32>, kTxBatch> tx_gso_cmsg_{};
    bool                                          gso_           = false; ///< UDP_SEGMENT in use
    uint64_t                                      gso_sends_     = 0;
    uint64_t                                      gso_segments_  = 0;
    uint64_t                                      gso_fallbacks_ = 0;
    TxSyscall                                     tx_syscall_    = ::sendmmsg;
    /* a lone small packet leaves through sendto from one buffer: no
     * msghdr and iovec for the kernel to copy in */
    std::array<uint8_t, sizeof(WireHeader) + kLinearTx> tx_linear_{};

    std::unique_ptr<FaultInjector> faults_;
    pacing::PacingFactory          pacing_;
    double                         line_rate_ = 0;
    std::string                    cc_; ///< the pacing policy in force
};

/// Devices: the host's interfaces with an IPv4 address that are up.
int query_devices(doorbell_device_info_t *devices, int max);

/// The UDP iface behind a core iface; nullptr for none or another device
/// (what every test seam below takes).
inline UdpIface *udp_iface(doorbell_iface_t *iface)
{
    return iface != nullptr && iface->kind == DOORBELL_DEVICE_UDP ? static_cast<UdpIface *>(iface) :
                                                                    nullptr;
}
inline const UdpIface *udp_iface(const doorbell_iface_t *iface)
{
    return udp_iface(const_cast<doorbell_iface_t *>(iface));
}

/// Test seam: a UDP QP's connection as its peer sees it (the token, the
/// peer's QP number for it, the next PSN); false if not connected yet.
bool connection_of(doorbell_qp_t *qp, uint64_t *token, uint32_t *remote_qpn, uint32_t *next_psn);

/// Test seam: starts a QP's connection handshake now, as its first post
/// would (a QP never used sends nothing, doorbell_qp_check included).
void connect_now(doorbell_qp_t *qp);

/// Test seam: len bytes handled as a datagram that arrived from `from`, or
/// (segment != 0) as a merged buffer (GRO) of datagrams of segment bytes.
void inject_datagram(doorbell_iface_t *iface, const void *bytes, size_t len,
                     const sockaddr_in &from, size_t segment = 0);

} // namespace doorbell::udp
