/* libFuzzer target for the packet parser (built with Clang only):
 *   build/tests/udp/doorbell_udp_parser_fuzz -max_total_time=60 */
#include "devices/udp/parser.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using namespace doorbell::udp;
    ParseResult r = parse(data, size);
    if (r.status == ParseStatus::kOk && r.pack_count != 0) {
        /* a pack: its messages, one-packet SENDs at consecutive PSNs,
         * within the datagram and exactly up to its rider */
        size_t end = size - (r.has_ride ? sizeof(RideAck) : 0);
        if (data[0] != kPackKind || size > kPackMaxBytes || r.pack_count > kPackMaxMessages ||
            r.has_ride != ((data[1] & kFlagRide) != 0) ||
            (r.has_ride && (r.ride.token == 0 || r.ride.qp == 0))) {
            abort();
        }
        PackReader     reader(r);
        WireHeader     h;
        const uint8_t *payload;
        uint32_t       n    = 0;
        const uint8_t *last = data;
        while (reader.next(h, payload)) {
            if (h.opcode != uint8_t(Opcode::kSend) || h.psn != r.header.psn + n ||
                h.length != h.msg_length || h.msg_offset != 0 || payload < last ||
                payload + h.length > data + end || h.token == 0 || h.dst_qp == 0) {
                abort();
            }
            last = payload + h.length;
            ++n;
        }
        if (n != r.pack_count || last != data + end) {
            abort();
        }
        return 0;
    }
    if (r.status == ParseStatus::kOk) {
        const WireHeader &h = r.header;
        /* what the receive path relies on */
        size_t ride = r.has_ride ? sizeof(RideAck) : 0;
        if (size != r.header_bytes + h.length + ride || r.payload != data + r.header_bytes) {
            abort();
        }
        /* a riding ACK: behind a full-header request, naming a connection */
        if (r.has_ride != ((h.flags & kFlagRide) != 0) ||
            (r.has_ride && (!may_carry_ack(h.opcode) || r.header_bytes != sizeof(WireHeader) ||
                            r.ride.token == 0 || r.ride.qp == 0))) {
            abort();
        }
        bool seg = data[0] == kSegKind;
        if (seg != (r.header_bytes != sizeof(WireHeader)) ||
            (seg && ((h.opcode != uint8_t(Opcode::kWrite) && h.opcode != uint8_t(Opcode::kSend) &&
                      h.opcode != uint8_t(Opcode::kReadResp)) ||
                     r.header_bytes != seg_header_bytes(Opcode(h.opcode), h.flags & kFlagFirst,
                                                        h.ts_send != 0)))) {
            abort();
        }
        bool data_op = h.opcode == uint8_t(Opcode::kWrite) || h.opcode == uint8_t(Opcode::kSend) ||
                       h.opcode == uint8_t(Opcode::kReadResp);
        /* a segment after its FIRST names no offset (the responder has it);
         * a READ_RESP segment no length (the requester has it) */
        bool implied = seg && h.opcode != uint8_t(Opcode::kReadResp) && !(h.flags & kFlagFirst);
        if (data_op && !implied && !(seg && h.opcode == uint8_t(Opcode::kReadResp)) &&
            uint64_t(h.msg_offset) + h.length > h.msg_length) {
            abort();
        }
        if (implied && (h.msg_offset != kOffsetImplied || h.msg_length != 0)) {
            abort();
        }
        /* a signal's operand and an atomic's operands are the only other
         * payloads */
        uint32_t fixed = h.opcode == uint8_t(Opcode::kSignal)    ? 8 :
                         h.opcode == uint8_t(Opcode::kAtomicReq) ? uint32_t(sizeof(AtomicArgs)) :
                                                                   0;
        if (!data_op && h.length != fixed) {
            abort();
        }
        if ((h.opcode == uint8_t(Opcode::kAtomicReq) || h.opcode == uint8_t(Opcode::kAtomicResp)) &&
            h.msg_length != 4 && h.msg_length != 8) {
            abort();
        }
    }
    return 0;
}
