/*
 * The UDP device's wire format: a 64-byte header in front of a datagram's
 * payload; read responses and the segments of a WRITE or SEND that takes
 * several packets carry a shorter one (DataHeader: 32 bytes, 48 for a WRITE,
 * 40 for a READ_RESP) that the parser expands into the same WireHeader. Little-endian (static_assert below), packed,
 * versioned.
 *
 * Requests travel from a requester QP to the responder state the peer keeps
 * for it (keyed by source address and src_qp); every request packet carries
 * a PSN, and the responder accepts them strictly in PSN order (go-back-N).
 * Responses (ACK, NAK, READ_RESP) travel back to dst_qp.
 *
 * The header is exactly DOORBELL_AM_HEADROOM bytes: an active message is
 * delivered in place and the header bytes before it are the callee's headroom.
 */
#pragma once

#include "core/doorbell_core.h"

#include <bit>
#include <cstddef>
#include <cstdint>

namespace doorbell::udp {

static constexpr uint32_t kMagic       = 0x4c424244; ///< "DBBL" on the wire
static constexpr uint32_t kDataMagic   = 0x64424244; ///< "DBBd": a DataHeader
static constexpr uint8_t  kVersion     = 2;
static constexpr uint32_t kMaxDatagram = 65000; ///< bytes, header included

enum class Opcode : uint8_t {
    kWrite    = 1, ///< RDMA WRITE segment: payload -> remote_addr + msg_offset
    kReadReq  = 2, ///< RDMA READ request for msg_length bytes at remote_addr
    kReadResp = 3, ///< RDMA READ data; psn = the request's PSN
    kSend     = 4, ///< active-message segment; am_id names the handler
    kAck      = 5, ///< cumulative: psn = next expected PSN
    kNak      = 6, ///< psn = next expected PSN; am_id = NakCode
    kAckReq   = 7, ///< probe: ACK now; psn = the sender's next PSN (a gap
                   ///< below it is NAKed at once: tail-loss detection)
    kSignal = 8,   ///< 8-byte signal update at remote_addr (PUT_SIGNAL, after
                   ///< its WRITE segments); am_id = doorbell_signal_op,
                   ///< payload = the operand

    /* atomics (doorbell_qp_atomic) */
    kAtomicReq = 9,   ///< one atomic on the msg_length-byte word (4 or 8) at
                      ///< remote_addr; am_id = doorbell_atomic_op, payload =
                      ///< AtomicArgs
    kAtomicResp = 10, ///< answer to the atomic at psn (the request's PSN):
                      ///< remote_addr = the word's value before it
                      ///< (zero-extended), msg_length = its size
    kLast
};

enum HeaderFlags : uint8_t {
    kFlagFirst = 1u << 0,  ///< first segment of a message (READ_RESP: first
                           ///< answer to a request: an RTT sample)
    kFlagLast   = 1u << 1, ///< last segment of a message
    kFlagRetry  = 1u << 2, ///< READ_REQ sent again: re-read even if already seen
    kFlagAckReq = 1u << 3, ///< someone waits on this packet: ACK at once
    kFlagMask   = kFlagFirst | kFlagLast | kFlagRetry | kFlagAckReq
};

enum class NakCode : uint8_t {
    kSequence     = 1, ///< gap: resend from psn
    kReceiverBusy = 2, ///< no receive buffer for an AM: resend psn later
    kAccess       = 3, ///< remote key, bounds or access rejected psn
    kInvalid      = 4, ///< malformed request at psn
    kLast
};

struct [[gnu::packed]] WireHeader {
    uint32_t magic;       /* kMagic */
    uint8_t  version;     /* kVersion */
    uint8_t  opcode;      /* Opcode */
    uint8_t  flags;       /* HeaderFlags */
    uint8_t  am_id;       /* SEND: AM id; NAK: NakCode; SIGNAL: signal op;
                            * ATOMIC_REQ: doorbell_atomic_op */
    uint32_t src_qp;      /* QP number of the requester */
    uint32_t dst_qp;      /* responses: requester's QP; requests: 0 */
    uint32_t psn;         /* see Opcode */
    uint32_t length;      /* payload bytes after this header */
    uint64_t remote_addr; /* WRITE/READ_REQ: message's target address */
    uint32_t rkey;        /* WRITE/READ_REQ: remote key */
    uint32_t msg_length;  /* bytes of the whole message (read request) */
    uint32_t msg_offset;  /* offset of this payload in the message
                            * (READ_REQ: first chunk wanted; ACK/NAK: ns the
                            * answer was kept after its packet was processed,
                            * so the sender can take a delayed ACK's hold out
                            * of its RTT sample) */
    uint32_t aux;         /* ACK/NAK: CE-marked bytes; READ_REQ: chunk size;
                            * READ_RESP: 0 (answered as it is processed) */
    uint64_t ts_send;     /* sender's monotonic clock, ns */
    uint64_t ts_echo;     /* ACK/NAK/READ_RESP: ts_send of the packet
                            * answered */
};

/*
 * The header of each segment of a WRITE or SEND that takes more than one
 * packet, and of every READ_RESP. A bulk transfer is all segments, and on a
 * 1500-byte MTU the 64-byte header cost 4.3 % of the link: these carry 32
 * bytes more payload (16 for a WRITE, 24 for a READ_RESP). Only what a
 * segment needs travels; the payload length is the rest of the datagram, the
 * fields a segment does not have are 0. A one-packet WRITE or SEND keeps the
 * full header: an active message is delivered in place, behind its 64 bytes.
 */
struct [[gnu::packed]] DataHeader {
    uint32_t magic;   /* kDataMagic */
    uint8_t  version; /* kVersion */
    uint8_t  opcode;  /* kWrite, kSend or kReadResp */
    uint8_t  flags;   /* HeaderFlags */
    uint8_t  am_id;   /* SEND: AM id; otherwise 0 */
    uint32_t qp;      /* WRITE, SEND: src_qp; READ_RESP: dst_qp */
    uint32_t psn;
    uint32_t msg_length;
    uint32_t msg_offset;
    uint64_t ts_send;
};

/// What follows a WRITE's DataHeader: where the message goes.
struct [[gnu::packed]] DataTarget {
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t reserved; /* 0 */
};

/// What follows a READ_RESP's DataHeader: the request's ts_send (an RTT
/// sample when the FIRST flag is set).
struct [[gnu::packed]] DataEcho {
    uint64_t ts_echo;
};

static_assert(sizeof(DataHeader) == 32 && sizeof(DataTarget) == 16 && sizeof(DataEcho) == 8);

/// Bytes of the DataHeader (and what follows it) of an opcode's segments.
constexpr uint32_t data_header_bytes(Opcode op)
{
    return op == Opcode::kWrite    ? uint32_t(sizeof(DataHeader) + sizeof(DataTarget)) :
           op == Opcode::kReadResp ? uint32_t(sizeof(DataHeader) + sizeof(DataEcho)) :
                                     uint32_t(sizeof(DataHeader));
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
