#include "parser.h"

#include <cstring>

namespace doorbell::udp {

namespace {

/// A handshake's port counts: at least one steered port, and with the
/// spare ones no more than a peer may bind (each bound in 32 bits: no sum
/// that wraps).
bool ports_valid(const WireHeader &h)
{
    return h.aux != 0 && h.aux <= kMaxPaths && h.am_id <= kMaxPaths - h.aux;
}

} // namespace

ParseStatus check_header(const WireHeader &h, size_t payload_len)
{
    if (h.magic != kMagic || h.version != kVersion) {
        return ParseStatus::kForeign;
    }
    if ((h.flags & ~kFlagMask) != 0 || h.opcode == 0 || h.opcode >= uint8_t(Opcode::kLast)) {
        return ParseStatus::kMalformed;
    }
    /* an ACK rides only on a request of the send path, behind its payload */
    size_t ride = 0;
    if (h.flags & kFlagRide) {
        if (!may_carry_ack(h.opcode)) {
            return ParseStatus::kMalformed;
        }
        ride = sizeof(RideAck);
    }
    if (uint64_t(h.length) + ride != payload_len) {
        return uint64_t(h.length) + ride > payload_len ? ParseStatus::kTruncated :
                                                         ParseStatus::kMalformed;
    }
    /* every packet belongs to a connection (CONNECT: to an iface), which no
     * token 0 and no QP 0 name */
    if (h.token == 0 || (h.dst_qp == 0) != (h.opcode == uint8_t(Opcode::kConnect))) {
        return ParseStatus::kMalformed;
    }
    /* offsets are 32-bit, sums are computed in 64-bit: no wrap */
    uint64_t seg_end = uint64_t(h.msg_offset) + h.length;
    switch (Opcode(h.opcode)) {
    case Opcode::kWrite:
        if (seg_end > h.msg_length || h.remote_addr + h.msg_length < h.remote_addr) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kSend:
        if (seg_end > h.msg_length) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kReadReq:
        /* msg_offset: a request asked again starts at its first missing
         * chunk */
        if (h.length != 0 || h.aux == 0 ||
            h.aux > kMaxDatagram - seg_header_max(Opcode::kReadResp) ||
            h.msg_offset > h.msg_length || h.msg_offset % h.aux != 0 ||
            h.remote_addr + h.msg_length < h.remote_addr) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kSignal:
        /* one 64-bit word, SET or ADD (alignment is the responder's
         * access check: a misaligned target is an access error) */
        if (h.length != 8 || h.msg_length != 8 || h.msg_offset != 0 ||
            h.am_id > DOORBELL_SIGNAL_ADD || h.remote_addr + 8 < h.remote_addr) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kAtomicReq: {
        /* one word of 4 or 8 bytes (its alignment, like a signal's, is
         * the responder's access check, and so are operands wider than the
         * word: they are payload) */
        if (h.length != sizeof(AtomicArgs) || (h.msg_length != 4 && h.msg_length != 8) ||
            h.msg_offset != 0 || h.am_id >= DOORBELL_ATOMIC_LAST ||
            h.remote_addr + h.msg_length < h.remote_addr) {
            return ParseStatus::kMalformed;
        }
        break;
    }
    case Opcode::kAtomicResp:
        if (h.length != 0 || (h.msg_length != 4 && h.msg_length != 8) || h.msg_offset != 0 ||
            (h.msg_length == 4 && (atomic_value(h) >> 32) != 0)) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kReadResp:
        if (seg_end > h.msg_length || h.length == 0) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kAck:
    case Opcode::kAckReq:
        if (h.length != 0) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kNak:
        if (h.length != 0 || h.am_id == 0 || h.am_id >= uint8_t(NakCode::kLast) ||
            h.rkey >= uint32_t(NakCause::kLast)) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kConnect:
        if (h.length != sizeof(ConnectPayload) || h.src_qp == 0 || !ports_valid(h)) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kAccept:
        if (h.length != 0 || h.src_qp == 0 || !ports_valid(h)) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kDisconnect:
        if (h.length != 0) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kLast:
        return ParseStatus::kMalformed;
    }
    return ParseStatus::kOk;
}

namespace {

/// A segment (SegHeader): expanded into r.header. A WRITE's or SEND's
/// segment after its FIRST gets msg_offset kOffsetImplied and no length or
/// target (the responder has them); a READ_RESP gets no msg_length (the
/// requester knows its piece). Reads at most head_len bytes of bytes.
ParseResult parse_seg(const uint8_t *bytes, size_t head_len, size_t len)
{
    ParseResult r{};
    SegHeader   g;
    if (head_len < sizeof(g) || len < sizeof(g)) {
        r.status = ParseStatus::kTruncated;
        return r;
    }
    std::memcpy(&g, bytes, sizeof(g));
    Opcode op    = Opcode(g.opcode);
    bool   first = g.flags & kFlagFirst, stamp = g.flags & kFlagStamp;
    if (op != Opcode::kWrite && op != Opcode::kSend && op != Opcode::kReadResp) {
        r.status = ParseStatus::kMalformed;
        return r;
    }
    uint8_t allowed = op == Opcode::kReadResp ?
                          uint8_t(kFlagFirst) :
                          uint8_t(kFlagFirst | kFlagLast | kFlagAckReq | kFlagStamp);
    if ((g.flags & ~allowed) != 0 || g.token == 0 || g.dst_qp == 0 ||
        (op != Opcode::kSend && g.am_id != 0)) {
        r.status = ParseStatus::kMalformed;
        return r;
    }
    uint32_t hdr_bytes = seg_header_bytes(op, first, stamp);
    if (head_len < hdr_bytes || len < hdr_bytes) {
        r.status = ParseStatus::kTruncated;
        return r;
    }
    WireHeader &h = r.header;
    h             = make_header(op);
    h.flags       = uint8_t(g.flags & ~kFlagStamp);
    h.am_id       = g.am_id;
    h.token       = g.token;
    h.dst_qp      = g.dst_qp;
    h.psn         = g.psn;
    h.length      = uint32_t(len - hdr_bytes);
    size_t at     = sizeof(g);
    if (stamp) {
        std::memcpy(&h.ts_send, bytes + at, sizeof(h.ts_send));
        at += sizeof(h.ts_send);
        if (h.ts_send == 0) { /* 0 is "not stamped" */
            r.status = ParseStatus::kMalformed;
            return r;
        }
    }
    if (op == Opcode::kReadResp) {
        std::memcpy(&h.msg_offset, bytes + at, sizeof(h.msg_offset));
        at += sizeof(h.msg_offset);
        if (first) {
            std::memcpy(&h.ts_echo, bytes + at, sizeof(h.ts_echo));
        }
        if (h.length == 0 || uint64_t(h.msg_offset) + h.length > UINT32_MAX) {
            r.status = ParseStatus::kMalformed;
            return r;
        }
    } else if (first) {
        SegFirst f;
        std::memcpy(&f, bytes + at, sizeof(f));
        at += sizeof(f);
        h.msg_length = f.msg_length;
        if (op == Opcode::kWrite) {
            SegTarget t;
            std::memcpy(&t, bytes + at, sizeof(t));
            h.remote_addr = t.remote_addr;
            h.rkey        = t.rkey;
            if (h.remote_addr + h.msg_length < h.remote_addr) {
                r.status = ParseStatus::kMalformed;
                return r;
            }
        }
        /* the FIRST begins the message; a FIRST that is also LAST is all of it */
        if (h.length > h.msg_length || ((g.flags & kFlagLast) && h.length != h.msg_length)) {
            r.status = ParseStatus::kMalformed;
            return r;
        }
    } else {
        h.msg_offset = kOffsetImplied;
    }
    r.status       = ParseStatus::kOk;
    r.payload      = bytes + hdr_bytes;
    r.header_bytes = hdr_bytes;
    return r;
}

/// A ride's own consistency (the receiver checks its connection).
bool ride_ok(const RideAck &ride)
{
    return ride.token != 0 && ride.qp != 0;
}

/// A pack: its header, every message's bounds, the stamp and the rider,
/// exactly to the datagram's end. r.header is its first message.
ParseResult parse_pack(const uint8_t *bytes, size_t head_len, size_t len)
{
    ParseResult r{};
    PackHeader  p;
    if (head_len < len || len < sizeof(p)) {
        r.status = ParseStatus::kTruncated; /* (a pack is never peeked at) */
        return r;
    }
    if (len > kPackMaxBytes) {
        r.status = ParseStatus::kMalformed;
        return r;
    }
    std::memcpy(&p, bytes, sizeof(p));
    if ((p.flags & ~kPackFlagMask) != 0 || p.count == 0 || p.count > kPackMaxMessages ||
        p.token == 0 || p.dst_qp == 0 || (p.count > 1 && p.am_id != 0)) {
        r.status = ParseStatus::kMalformed;
        return r;
    }
    size_t   at = sizeof(p);
    uint64_t ts = 0;
    if (p.flags & kFlagStamp) {
        if (len < at + sizeof(ts)) {
            r.status = ParseStatus::kTruncated;
            return r;
        }
        std::memcpy(&ts, bytes + at, sizeof(ts));
        if (ts == 0) { /* 0 is "not stamped" */
            r.status = ParseStatus::kMalformed;
            return r;
        }
        at += sizeof(ts);
    }
    size_t ride = (p.flags & kFlagRide) ? sizeof(RideAck) : 0;
    if (len < at + ride) {
        r.status = ParseStatus::kTruncated;
        return r;
    }
    size_t   end   = len - ride; /* where the messages end */
    uint32_t first = 0;          /* the first message's length */
    size_t   first_at;
    if (p.count == 1) {
        first_at = at;
        first    = uint32_t(end - at);
    } else {
        size_t walk = at;
        for (uint32_t i = 0; i < p.count; ++i) {
            PackMember m;
            if (end < walk + sizeof(m)) {
                r.status = ParseStatus::kTruncated;
                return r;
            }
            std::memcpy(&m, bytes + walk, sizeof(m));
            walk += sizeof(m);
            if (end < walk + m.length) {
                r.status = ParseStatus::kTruncated;
                return r;
            }
            if (i == 0) {
                first = m.length;
            }
            walk += m.length;
        }
        if (walk != end) {
            r.status = ParseStatus::kMalformed; /* bytes after the last message */
            return r;
        }
        first_at = at + sizeof(PackMember);
    }
    if (ride != 0) {
        std::memcpy(&r.ride, bytes + end, sizeof(r.ride));
        if (!ride_ok(r.ride)) {
            r.status = ParseStatus::kMalformed;
            return r;
        }
        r.has_ride = true;
    }
    WireHeader &h = r.header;
    h             = make_header(Opcode::kSend);
    h.flags       = kFlagFirst | kFlagLast;
    h.am_id       = p.count == 1 ? p.am_id : bytes[at];
    h.token       = p.token;
    h.dst_qp      = p.dst_qp;
    h.psn         = p.psn;
    h.length      = first;
    h.msg_length  = first;
    h.ts_send     = ts;
    if (p.count == 1 && (p.flags & kFlagAckReq)) {
        h.flags |= kFlagAckReq;
    }
    r.status       = ParseStatus::kOk;
    r.payload      = bytes + first_at;
    r.header_bytes = uint32_t(first_at);
    r.pack_count   = p.count;
    r.pack_ack_req = (p.flags & kFlagAckReq) != 0;
    return r;
}

} // namespace

PackReader::PackReader(const ParseResult &r) :
    r_(r), at_(r.payload - (r.pack_count > 1 ? sizeof(PackMember) : 0))
{
}

bool PackReader::next(WireHeader &h, const uint8_t *&payload)
{
    if (i_ >= r_.pack_count) {
        return false;
    }
    h     = r_.header;
    h.psn = r_.header.psn + i_;
    if (r_.pack_count == 1) {
        payload = r_.payload;
    } else {
        PackMember m;
        std::memcpy(&m, at_, sizeof(m));
        h.am_id      = m.am_id;
        h.length     = m.length;
        h.msg_length = m.length;
        payload      = at_ + sizeof(m);
        at_          = payload + m.length;
    }
    h.flags = kFlagFirst | kFlagLast;
    if (++i_ == r_.pack_count && r_.pack_ack_req) {
        h.flags |= kFlagAckReq;
    }
    return true;
}

ParseResult parse_header(const uint8_t *head, size_t head_len, size_t len)
{
    ParseResult r{};
    if (head != nullptr && head_len >= 1 && len >= 1 && head[0] == kPackKind) {
        return parse_pack(head, head_len, len);
    }
    if (head != nullptr && head_len >= 1 && len >= 1 && head[0] == kSegKind) {
        return parse_seg(head, head_len, len);
    }
    if (head == nullptr || head_len < sizeof(WireHeader) || len < sizeof(WireHeader)) {
        r.status = ParseStatus::kTruncated;
        return r;
    }
    std::memcpy(&r.header, head, sizeof(WireHeader));
    r.status = check_header(r.header, len - sizeof(WireHeader));
    if (r.status != ParseStatus::kOk) {
        return r;
    }
    r.payload      = head + sizeof(WireHeader);
    r.header_bytes = uint32_t(sizeof(WireHeader));
    size_t at      = sizeof(WireHeader) + r.header.length;
    if ((r.header.flags & kFlagRide) && head_len >= at + sizeof(RideAck)) {
        /* (a peek that holds the header but not the riding ACK leaves it
         * to the full parse: has_ride stays false) */
        std::memcpy(&r.ride, head + at, sizeof(RideAck));
        if (!ride_ok(r.ride)) {
            r.status = ParseStatus::kMalformed;
            return r;
        }
        r.has_ride = true;
    }
    return r;
}

ParseResult parse(const uint8_t *bytes, size_t len)
{
    return parse_header(bytes, len, len);
}

uint32_t encode_pack_header(uint8_t *out, uint8_t flags, uint32_t count, uint8_t am_id,
                            uint64_t token, uint32_t dst_qp, uint32_t psn, uint64_t ts_send)
{
    PackHeader p{};
    p.kind   = kPackKind;
    p.flags  = uint8_t(flags | (ts_send != 0 ? kFlagStamp : 0));
    p.count  = uint8_t(count);
    p.am_id  = count == 1 ? am_id : 0;
    p.dst_qp = dst_qp;
    p.token  = token;
    p.psn    = psn;
    std::memcpy(out, &p, sizeof(p));
    if (ts_send == 0) {
        return uint32_t(sizeof(p));
    }
    std::memcpy(out + sizeof(p), &ts_send, sizeof(ts_send));
    return uint32_t(sizeof(p) + sizeof(ts_send));
}

uint32_t encode_seg_header(const WireHeader &h, uint8_t *out)
{
    Opcode    op    = Opcode(h.opcode);
    bool      first = h.flags & kFlagFirst, stamp = op != Opcode::kReadResp && h.ts_send != 0;
    SegHeader g{};
    g.kind   = kSegKind;
    g.flags  = uint8_t(h.flags | (stamp ? kFlagStamp : 0));
    g.opcode = h.opcode;
    g.am_id  = op == Opcode::kSend ? h.am_id : 0;
    g.dst_qp = h.dst_qp;
    g.token  = h.token;
    g.psn    = h.psn;
    std::memcpy(out, &g, sizeof(g));
    size_t at = sizeof(g);
    if (stamp) {
        std::memcpy(out + at, &h.ts_send, sizeof(h.ts_send));
        at += sizeof(h.ts_send);
    }
    if (op == Opcode::kReadResp) {
        std::memcpy(out + at, &h.msg_offset, sizeof(h.msg_offset));
        at += sizeof(h.msg_offset);
        if (first) {
            std::memcpy(out + at, &h.ts_echo, sizeof(h.ts_echo));
            at += sizeof(h.ts_echo);
        }
    } else if (first) {
        SegFirst f{h.msg_length};
        std::memcpy(out + at, &f, sizeof(f));
        at += sizeof(f);
        if (op == Opcode::kWrite) {
            SegTarget t{h.remote_addr, h.rkey};
            std::memcpy(out + at, &t, sizeof(t));
            at += sizeof(t);
        }
    }
    return uint32_t(at);
}

const char *parse_status_string(ParseStatus status)
{
    switch (status) {
    case ParseStatus::kOk:
        return "ok";
    case ParseStatus::kTruncated:
        return "truncated";
    case ParseStatus::kForeign:
        return "foreign";
    case ParseStatus::kMalformed:
        return "malformed";
    }
    return "?";
}

} // namespace doorbell::udp
