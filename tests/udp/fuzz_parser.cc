/* libFuzzer target for the packet parser (built with Clang only):
 *   build/tests/udp/doorbell_udp_parser_fuzz -max_total_time=60 */
#include "devices/udp/parser.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    using namespace doorbell::udp;
    ParseResult r = parse(data, size);
    if (r.status == ParseStatus::kOk) {
        const WireHeader &h = r.header;
        /* what the receive path relies on */
        if (size != r.header_bytes + h.length || r.payload != data + r.header_bytes) {
            abort();
        }
        if (r.header_bytes != sizeof(WireHeader) &&
            ((h.opcode != uint8_t(Opcode::kWrite) && h.opcode != uint8_t(Opcode::kSend) &&
              h.opcode != uint8_t(Opcode::kReadResp)) ||
             r.header_bytes != data_header_bytes(Opcode(h.opcode)))) {
            abort();
        }
        bool data_op = h.opcode == uint8_t(Opcode::kWrite) || h.opcode == uint8_t(Opcode::kSend) ||
                       h.opcode == uint8_t(Opcode::kReadResp);
        if (data_op && uint64_t(h.msg_offset) + h.length > h.msg_length) {
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
