#include "parser.h"

#include <cstring>

namespace doorbell::udp {

ParseStatus check_header(const WireHeader &h, size_t payload_len)
{
    if (h.magic != kMagic || h.version != kVersion) {
        return ParseStatus::kForeign;
    }
    if (h.length != payload_len) {
        return h.length > payload_len ? ParseStatus::kTruncated
                                      : ParseStatus::kMalformed;
    }
    if ((h.flags & ~kFlagMask) != 0 || h.opcode == 0 ||
        h.opcode >= uint8_t(Opcode::kLast)) {
        return ParseStatus::kMalformed;
    }
    /* offsets are 32-bit, sums are computed in 64-bit: no wrap */
    uint64_t seg_end = uint64_t(h.msg_offset) + h.length;
    switch (Opcode(h.opcode)) {
    case Opcode::kWrite:
        if (seg_end > h.msg_length ||
            h.remote_addr + h.msg_length < h.remote_addr) {
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
            h.aux > kMaxDatagram - sizeof(WireHeader) ||
            h.msg_offset > h.msg_length || h.msg_offset % h.aux != 0 ||
            h.remote_addr + h.msg_length < h.remote_addr) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kSignal:
        /* one 64-bit word, SET or ADD (alignment is the responder's
         * access check: a misaligned target is an access error) */
        if (h.length != 8 || h.msg_length != 8 || h.msg_offset != 0 ||
            h.am_id > DOORBELL_SIGNAL_ADD ||
            h.remote_addr + 8 < h.remote_addr) {
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
        if (h.length != 0 || h.am_id == 0 ||
            h.am_id >= uint8_t(NakCode::kLast)) {
            return ParseStatus::kMalformed;
        }
        break;
    case Opcode::kLast:
        return ParseStatus::kMalformed;
    }
    return ParseStatus::kOk;
}

ParseResult parse(const uint8_t *bytes, size_t len)
{
    ParseResult r{};
    if (bytes == nullptr || len < sizeof(WireHeader)) {
        r.status = ParseStatus::kTruncated;
        return r;
    }
    std::memcpy(&r.header, bytes, sizeof(WireHeader));
    r.status = check_header(r.header, len - sizeof(WireHeader));
    if (r.status == ParseStatus::kOk) {
        r.payload = bytes + sizeof(WireHeader);
    }
    return r;
}

const char *parse_status_string(ParseStatus status)
{
    switch (status) {
    case ParseStatus::kOk:        return "ok";
    case ParseStatus::kTruncated: return "truncated";
    case ParseStatus::kForeign:   return "foreign";
    case ParseStatus::kMalformed: return "malformed";
    }
    return "?";
}

} // namespace doorbell::udp
