/*
 * The UDP device's wire format: a 64-byte header in front of a datagram's
 * payload; read responses and the segments of a WRITE or SEND that takes
 * several packets carry a shorter one (SegHeader: 20 bytes, and what a
 * FIRST, a stamp or a READ_RESP adds), and active messages of one packet
 * travel in packs (PackHeader: 20 bytes for one message, 3 more per message
 * when several share a datagram); the parser expands each into the same
 * WireHeader.
 * Little-endian (static_assert below), packed, versioned.
 *
 * Connections: a requester QP connects to a peer iface with CONNECT, which
 * carries the target iface's token (from its address blob, which only the
 * job has), the requester's QP, its random initial PSN and a fresh random
 * connection token; the responder answers ACCEPT with the QP number of the
 * state it keeps for the connection. From then on every packet, both ways,
 * carries the connection token and names its receiver's QP (dst_qp), at the
 * same offsets in both header formats (Prefix): the receive path checks the
 * token, then the source address, before it looks at anything else.
 * Requests are accepted strictly in PSN order (go-back-N); responses (ACK,
 * NAK, READ_RESP) travel back to the requester's QP.
 *
 * The header is exactly DOORBELL_AM_HEADROOM bytes: an active message is
 * delivered in place and the header bytes before it are the callee's headroom.
 */
#pragma once

#include "core/doorbell_core.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace doorbell::udp {

static constexpr uint32_t kMagic   = 0x4c424244; ///< "DBBL" on the wire
static constexpr uint8_t  kVersion = 7;          ///< 3: connections and tokens;
                                                 ///< 4: ACKs ride on requests;
                                                 ///< 5: packs, segments, 32-byte RideAck;
                                                 ///< 6: multipath (CONNECT's and
                                                 ///< ACCEPT's aux: the sender's paths);
                                                 ///< 7: spare ports (their am_id)
static constexpr uint8_t kPackKind = 0xd5;       ///< first byte of a PackHeader
                                                 ///< (a pack of version 5; the
                                                 ///< other headers begin 'D')
static constexpr uint32_t kMaxDatagram = 65000;  ///< bytes, header included
/// A CONNECT's or ACCEPT's aux (the ports the sender steers over) and am_id
/// (the spare ports bound after them) together
static constexpr uint32_t kMaxPaths = DOORBELL_MAX_PATHS;

enum class Opcode : uint8_t {
    kWrite    = 1, ///< RDMA WRITE segment: payload -> remote_addr + msg_offset
    kReadReq  = 2, ///< RDMA READ request for msg_length bytes at remote_addr
    kReadResp = 3, ///< RDMA READ data; psn = the request's PSN
    kSend     = 4, ///< active-message segment; am_id names the handler
    kAck      = 5, ///< cumulative: psn = next expected PSN
    kNak      = 6, ///< psn = next expected PSN; am_id = NakCode; rkey =
                   ///< NakCause (ACCESS, INVALID: which check failed)
    kAckReq = 7,   ///< probe: ACK now; psn = the sender's next PSN (a gap
                   ///< below it is NAKed at once: tail-loss detection);
                   ///< aux = the IP TTL it left with when it is a spine
                   ///< probe (udp_path_probe.cc), else 0
    kSignal = 8,   ///< 8-byte signal update at remote_addr (PUT_SIGNAL, after
                   ///< its WRITE segments); am_id = doorbell_signal_op,
                   ///< payload = the operand

    /* atomics (doorbell_qp_atomic) */
    kAtomicReq = 9,   ///< one atomic on the msg_length-byte word (4 or 8) at
                      ///< remote_addr; am_id = doorbell_atomic_op, payload =
                      ///< AtomicArgs
    kAtomicResp = 10, ///< answer to the atomic at psn (the request's PSN): the
                      ///< word's value before it in rkey (low 32 bits) and aux
                      ///< (high 32 bits; atomic_value), msg_length = its size

    /* connections */
    kConnect = 11,    ///< token = the target iface's token; src_qp, psn = the
                      ///< requester's QP and initial PSN; aux = the ports it
                      ///< sends from (its own and the next aux - 1);
                      ///< payload: ConnectPayload
    kAccept = 12,     ///< to the requester's QP: src_qp = the responder's QP
                      ///< for the connection; psn = the initial PSN, echoed;
                      ///< aux = the ports the responder sends from
    kDisconnect = 13, ///< the requester's QP is gone: forget the connection
    kLast
};

enum HeaderFlags : uint8_t {
    kFlagFirst = 1u << 0,    ///< first segment of a message (READ_RESP: first
                             ///< answer to a request: an RTT sample)
    kFlagLast   = 1u << 1,   ///< last segment of a message
    kFlagRetry  = 1u << 2,   ///< READ_REQ sent again: re-read even if already seen
    kFlagAckReq = 1u << 3,   ///< someone waits on this packet: ACK at once
    kFlagRide   = 1u << 4,   ///< a request with the full header carries an ACK
                             ///< of a connection the other way behind its
                             ///< payload (RideAck)
    kFlagStamp    = 1u << 5, ///< a pack carries its ts_send (PackHeader)
    kFlagMask     = kFlagFirst | kFlagLast | kFlagRetry | kFlagAckReq | kFlagRide,
    kPackFlagMask = kFlagAckReq | kFlagRide | kFlagStamp
};

enum class NakCode : uint8_t {
    kSequence     = 1, ///< gap: resend from psn
    kReceiverBusy = 2, ///< no receive buffer for an AM: resend psn later
    kAccess       = 3, ///< remote key, bounds or access rejected psn
    kInvalid      = 4, ///< malformed request at psn
    kRefused      = 5, ///< CONNECT refused: the responder's table is full
    kLast
};

/// Why a request was rejected (NAK ACCESS or INVALID), in the NAK's rkey, so
/// that the requester's error names the check that failed instead of "key,
/// bounds or access". 0 (none given) in every other NAK. A field a NAK had
/// no use for: receivers of this version that predate it read nothing there.
enum class NakCause : uint8_t {
    kNone = 0,
    /* ACCESS: the protection domain's checks (AccessDenial), and alignment */
    kUnknownKey = 1, ///< no region under the remote key
    kOutOfRange = 2, ///< the range leaves the key's region
    kNotGranted = 3, ///< the region does not grant the access
    kMisaligned = 4, ///< a signal's or atomic's word not aligned to its size
    /* INVALID: the request itself */
    kOperandTooWide = 5, ///< a 4-byte atomic's operands beyond 32 bits
    kTooLong        = 6, ///< a message longer than any iface sends (MAX_SEG_SIZE)
    kOutOfSequence  = 7, ///< a segment with no message in progress, or a
                         ///< message's FIRST while another is in progress
    kPastEnd   = 8,      ///< a segment beyond its message's length, or a LAST short of it
    kAbandoned = 9,      ///< a half-sent message silent for KEEPALIVE_TIMEOUT, reclaimed
    kLast
};

/// The NAK code of a cause: the first four are ACCESS, the rest INVALID.
constexpr NakCode nak_code_of(NakCause c)
{
    return c <= NakCause::kMisaligned ? NakCode::kAccess : NakCode::kInvalid;
}

/// A short phrase for the requester's error: "no region under the remote key".
constexpr const char *nak_cause_text(NakCause c)
{
    switch (c) {
    case NakCause::kNone:
        return "no cause given";
    case NakCause::kUnknownKey:
        return "no region under the remote key";
    case NakCause::kOutOfRange:
        return "the range leaves the key's region";
    case NakCause::kNotGranted:
        return "the region does not grant the access";
    case NakCause::kMisaligned:
        return "the word is not aligned to its size";
    case NakCause::kOperandTooWide:
        return "a 4-byte atomic's operand does not fit 32 bits";
    case NakCause::kTooLong:
        return "the message is longer than any iface sends";
    case NakCause::kOutOfSequence:
        return "a segment out of its message's sequence";
    case NakCause::kPastEnd:
        return "a segment runs past its message's length or ends it short";
    case NakCause::kAbandoned:
        return "the message was left half-sent and reclaimed";
    case NakCause::kLast:
        break;
    }
    return "an unknown cause";
}

struct [[gnu::packed]] WireHeader {
    uint32_t magic;   /* kMagic */
    uint8_t  version; /* kVersion */
    uint8_t  opcode;  /* Opcode */
    uint8_t  flags;   /* HeaderFlags */
    uint8_t  am_id;   /* SEND: AM id; NAK: NakCode; SIGNAL: signal op;
                       * ATOMIC_REQ: doorbell_atomic_op; READ_REQ: the
                       * responder's ports (of its first 8, a bit each) its
                       * answers should leave out (udp_paths.h); CONNECT,
                       * ACCEPT: the sender's spare ports, bound after its
                       * aux ports (udp_path_classes.h) */
    uint64_t token;   /* the connection's token (CONNECT: the target iface's) */
    uint32_t dst_qp;  /* the receiver's QP: requests, the responder's for this
                       * connection; responses, the requester's; CONNECT: 0 */
    uint32_t src_qp;  /* the sender's QP (ACCEPT: the responder's) */
    uint32_t psn;     /* see Opcode */
    uint32_t length;  /* payload bytes after this header */
    union {
        uint64_t remote_addr; /* requests (WRITE/READ_REQ/SIGNAL/ATOMIC_REQ):
                               * the target */
        uint64_t ts_echo;     /* responses (ACK/NAK/READ_RESP/ATOMIC_RESP/
                               * ACCEPT): ts_send of the packet answered */
    };
    uint32_t rkey;       /* WRITE/READ_REQ/SIGNAL: remote key; NAK: NakCause */
    uint32_t msg_length; /* bytes of the whole message (read request) */
    uint32_t msg_offset; /* offset of this payload in the message
                          * (READ_REQ: first chunk wanted; ACK/NAK: ns the
                          * answer was kept after its packet was processed,
                          * so the sender can take a delayed ACK's hold out
                          * of its RTT sample) */
    uint32_t aux;        /* ACK/NAK: CE-marked bytes; READ_REQ: chunk size;
                          * READ_RESP: 0 (answered as it is processed);
                          * CONNECT/ACCEPT: the sender's paths; ACK_REQ:
                          * a spine probe's TTL, else 0 */
    uint64_t ts_send;    /* sender's monotonic clock, ns; a requester's
                          * low 4 bits name the port it left from
                          * (udp_paths.h) */
};

/*
 * An ACK that rides on a request (kFlagRide), after its header.length bytes
 * of payload: the cumulative ACK a responder owes the requester of a
 * connection the other way between the same two sockets, which would
 * otherwise leave as a datagram of its own a moment before or after. It
 * names that connection by its own token and the requester's QP, and is
 * checked as an ACK datagram would be (token, source address), apart from
 * the request that carries it: a request may be taken and its ACK dropped,
 * or the other way round.
 */
struct [[gnu::packed]] RideAck {
    uint64_t token;    /* the acknowledged connection's token */
    uint32_t qp;       /* the requester's QP (an ACK's dst_qp) */
    uint32_t psn;      /* next PSN expected (cumulative) */
    uint64_t ts_echo;  /* ts_send of the packet acknowledged */
    uint32_t hold;     /* ns the ACK was kept (an ACK's msg_offset) */
    uint32_t ce_bytes; /* CE-marked bytes (an ACK's aux) */
};
static_assert(sizeof(RideAck) == 32);

/*
 * A pack: one or more active messages of one packet each, of one connection,
 * at consecutive PSNs, in one datagram. A small message's datagram was
 * three-quarters header (64 of the 86 bytes of an 8-byte MPI message), and
 * on a link that forwards bytes, not packets, every header byte is time: a
 * pack of one message has 20 bytes of header, of several 3 more per message
 * (its AM id and length), and the sender packs what its doorbell batch holds
 * for one peer. After the header, with kFlagStamp, the 8-byte ts_send (a
 * sender stamps the packs whose answer it times); then the messages: one
 * message is the rest of the datagram, several are each a PackMember and its
 * payload; then, with kFlagRide, a RideAck. Every message is its own request
 * to the responder (its own PSN, executed, acknowledged and NAKed as one),
 * as if it had come alone with a full header; the pack's kFlagAckReq asks
 * for the ACK after its last.
 */
struct [[gnu::packed]] PackHeader {
    uint8_t  kind;   /* kPackKind */
    uint8_t  flags;  /* kPackFlagMask */
    uint8_t  count;  /* messages, 1 to kPackMaxMessages */
    uint8_t  am_id;  /* one message: its AM id; several: 0 */
    uint32_t dst_qp; /* the responder's QP of the connection */
    uint64_t token;  /* the connection's token */
    uint32_t psn;    /* the first message's; message i has psn + i */
};
static_assert(sizeof(PackHeader) == 20);

/// What precedes each message of a pack of several.
struct [[gnu::packed]] PackMember {
    uint8_t  am_id;
    uint16_t length; /* payload bytes */
};
static_assert(sizeof(PackMember) == 3);

static constexpr uint32_t kPackMaxMessages = 64;   ///< a doorbell batch (kTxBatch)
static constexpr uint32_t kPackMaxBytes    = 8192; ///< a pack's datagram at most: packs
                                                   ///< are copied together; larger
                                                   ///< messages go on their own
/// The bytes before a pack's first payload can be short of an AM's 64 of
/// headroom: every datagram is received this far into its receive buffer,
/// so a one-message pack is delivered in place as a full header's is.
static constexpr uint32_t kRxLead = DOORBELL_AM_HEADROOM - uint32_t(sizeof(PackHeader));
static_assert(sizeof(PackHeader) == 20, "a pack's header: the smallest a message has");

/// Whether a request of this opcode may carry a RideAck: those sent from a
/// requester's send path with the full header.
constexpr bool may_carry_ack(uint8_t opcode)
{
    return opcode == uint8_t(Opcode::kWrite) || opcode == uint8_t(Opcode::kSend) ||
           opcode == uint8_t(Opcode::kSignal) || opcode == uint8_t(Opcode::kReadReq) ||
           opcode == uint8_t(Opcode::kAtomicReq);
}

/// A CONNECT's payload.
struct [[gnu::packed]] ConnectPayload {
    uint64_t conn_token;  ///< the new connection's token (random, never 0)
    uint64_t iface_token; ///< the requester's iface token: a CONNECT from the
                          ///< same address with another one shows that the
                          ///< iface that had it is gone (a restarted peer)
};

/*
 * The header of each segment of a WRITE or SEND that takes more than one
 * packet, and of every READ_RESP (SegHeader, 20 bytes). A bulk transfer is
 * all segments, and on a 1500-byte MTU every header byte is payload the
 * link does not carry: a segment carries only what its receiver cannot know.
 * Requests are executed strictly in PSN order, so a WRITE's or SEND's
 * segments after its FIRST carry neither the message's length nor its
 * target nor their offset: the responder keeps them from the FIRST (as an
 * InfiniBand RC responder keeps a WRITE's RETH). After the header:
 *  - with kFlagStamp, the 8-byte ts_send (a sender stamps the segments
 *    whose answer it times);
 *  - a WRITE's or SEND's FIRST: SegFirst (the message's length), a WRITE's
 *    FIRST also its target (SegTarget);
 *  - a READ_RESP: its offset in the piece asked for (the requester knows
 *    the piece), and on the FIRST answer the request's ts_send (SegEcho);
 * and the payload is the rest of the datagram.
 */
static constexpr uint8_t kSegKind = 0xd6; ///< first byte of a SegHeader (version 5)

struct [[gnu::packed]] SegHeader {
    uint8_t  kind;   /* kSegKind */
    uint8_t  flags;  /* kFlagFirst, kFlagLast, kFlagAckReq, kFlagStamp */
    uint8_t  opcode; /* kWrite, kSend or kReadResp */
    uint8_t  am_id;  /* SEND: AM id; otherwise 0 */
    uint32_t dst_qp; /* WRITE, SEND the responder's QP; READ_RESP the requester's */
    uint64_t token;  /* the connection's token */
    uint32_t psn;    /* READ_RESP: the request's */
};

/// What follows a WRITE's or SEND's FIRST segment: the message's length.
struct [[gnu::packed]] SegFirst {
    uint32_t msg_length;
};

/// What follows a WRITE's SegFirst: where the message goes.
struct [[gnu::packed]] SegTarget {
    uint64_t remote_addr;
    uint32_t rkey;
};

/// What follows a READ_RESP's header: its offset in the piece, and on the
/// FIRST answer the request's ts_send (an RTT sample).
struct [[gnu::packed]] SegEcho {
    uint32_t msg_offset;
    uint64_t ts_echo; /* FIRST only */
};

static_assert(sizeof(SegHeader) == 20 && sizeof(SegFirst) == 4 && sizeof(SegTarget) == 12);
static_assert(sizeof(ConnectPayload) == 16);

/// msg_offset of a segment after its message's FIRST as parsed: the
/// responder takes it (and the length and target) from the FIRST.
static constexpr uint32_t kOffsetImplied = 0xffffffffu;

/// Bytes of the SegHeader (and what follows it) of a segment of op.
constexpr uint32_t seg_header_bytes(Opcode op, bool first, bool stamped)
{
    uint32_t n = uint32_t(sizeof(SegHeader)) + (stamped ? uint32_t(sizeof(uint64_t)) : 0);
    if (op == Opcode::kReadResp) {
        return n + uint32_t(sizeof(uint32_t)) + (first ? uint32_t(sizeof(uint64_t)) : 0);
    }
    if (!first) {
        return n;
    }
    return n + uint32_t(sizeof(SegFirst)) +
           (op == Opcode::kWrite ? uint32_t(sizeof(SegTarget)) : 0);
}

/// The largest segment header of op: a stamped FIRST.
constexpr uint32_t seg_header_max(Opcode op)
{
    return seg_header_bytes(op, true, op != Opcode::kReadResp);
}

static_assert(sizeof(WireHeader) == 64, "one cache line");
static_assert(sizeof(WireHeader) == DOORBELL_AM_HEADROOM, "the header is the AM headroom");
static_assert(std::endian::native == std::endian::little, "the wire format is little-endian");

/// The payload of an ATOMIC_REQ: its operands, in the word's size (a 4-byte
/// atomic's have their upper 32 bits 0). The order of a WQE's
/// atomic_compare and atomic_operand: a request is sent from its WQE.
struct [[gnu::packed]] AtomicArgs {
    uint64_t compare; /* CSWAP: the value expected; otherwise 0 */
    uint64_t operand; /* CSWAP: the new value */
};
static_assert(sizeof(AtomicArgs) == 16);
static_assert(offsetof(doorbell_wqe_t, atomic_operand) ==
              offsetof(doorbell_wqe_t, atomic_compare) + sizeof(uint64_t));

/// An ATOMIC_RESP's value (the word before the atomic): a response's 8 bytes
/// at remote_addr hold the echo, so the value travels in rkey and aux, which
/// a response has no other use for.
inline uint64_t atomic_value(const WireHeader &h)
{
    return uint64_t(h.aux) << 32 | h.rkey;
}

inline void set_atomic_value(WireHeader &h, uint64_t value)
{
    h.rkey = uint32_t(value);
    h.aux  = uint32_t(value >> 32);
}

/// What the receive path reads first of every packet, to find the
/// connection and check the token before it looks at anything else: the
/// full header's, a segment's or a pack's (whose opcode is kSend), each at
/// its format's offsets.
struct Prefix {
    uint32_t magic; ///< kMagic, or the kind byte: kPackKind, kSegKind
    uint8_t  version;
    uint8_t  opcode;
    uint64_t token;
    uint32_t dst_qp;
};
static constexpr size_t kPrefixBytes = 20;
static_assert(offsetof(WireHeader, token) == 8 && offsetof(WireHeader, dst_qp) == 16);
static_assert(offsetof(PackHeader, token) == 8 && offsetof(PackHeader, dst_qp) == 4 &&
              sizeof(PackHeader) == kPrefixBytes);
static_assert(offsetof(SegHeader, token) == 8 && offsetof(SegHeader, dst_qp) == 4 &&
              offsetof(SegHeader, opcode) == 2 && sizeof(SegHeader) == kPrefixBytes);

/// Reads the prefix of a datagram of len bytes; false if it is too short
/// to have one.
inline bool read_prefix(const uint8_t *bytes, size_t len, Prefix &p)
{
    if (len < kPrefixBytes) {
        return false;
    }
    if (bytes[0] == kPackKind || bytes[0] == kSegKind) {
        p.magic   = bytes[0];
        p.version = kVersion;
        p.opcode  = bytes[0] == kPackKind ? uint8_t(Opcode::kSend) : bytes[2];
        std::memcpy(&p.token, bytes + offsetof(PackHeader, token), 8);
        std::memcpy(&p.dst_qp, bytes + offsetof(PackHeader, dst_qp), 4);
        return true;
    }
    std::memcpy(&p.magic, bytes, 4);
    p.version = bytes[4];
    p.opcode  = bytes[5];
    std::memcpy(&p.token, bytes + 8, 8);
    std::memcpy(&p.dst_qp, bytes + 16, 4);
    return true;
}

/// Whether a prefix is of this version's formats (else: foreign).
inline bool known_prefix(const Prefix &p)
{
    return (p.magic == kMagic || p.magic == kPackKind || p.magic == kSegKind) &&
           p.version == kVersion;
}

/// Whether a packet of this opcode travels to a requester's QP (an answer)
/// rather than to the responder state of a connection (a request).
constexpr bool is_response(uint8_t opcode)
{
    return opcode == uint8_t(Opcode::kAck) || opcode == uint8_t(Opcode::kNak) ||
           opcode == uint8_t(Opcode::kReadResp) || opcode == uint8_t(Opcode::kAtomicResp) ||
           opcode == uint8_t(Opcode::kAccept);
}

/// Token comparison in constant time: one 64-bit compare, whatever the
/// bytes (no early exit an attacker could time).
inline bool tokens_equal(uint64_t a, uint64_t b)
{
    return (a ^ b) == 0;
}

/// PSN serial-number comparison (wraps at 2^32).
inline int32_t psn_diff(uint32_t a, uint32_t b)
{
    return int32_t(a - b);
}

/// A header of op with the magic and version filled in.
inline WireHeader make_header(Opcode op)
{
    WireHeader h{};
    h.magic   = kMagic;
    h.version = kVersion;
    h.opcode  = uint8_t(op);
    return h;
}

} // namespace doorbell::udp
