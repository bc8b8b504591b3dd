/*
 * The packet parser: a pure function from untrusted bytes to a validated
 * header, so it can be fuzzed alone. Everything the receive path relies on
 * about a header's internal consistency is checked here; what depends on
 * state (PSN window, keys, QPs) is checked by the receive path.
 */
#pragma once

#include "wire.h"

#include <cstddef>
#include <cstdint>

namespace doorbell::udp {

enum class ParseStatus : uint8_t {
    kOk,
    kTruncated, ///< shorter than the header, or than header.length says
    kForeign,   ///< wrong magic or version
    kMalformed  ///< unknown opcode/flags, inconsistent lengths or offsets
};

struct ParseResult {
    ParseStatus status;
    WireHeader  header;          ///< valid only when status == kOk (a
                                 ///< segment comes expanded, a segment after
                                 ///< its message's FIRST with msg_offset
                                 ///< kOffsetImplied; a pack as its first
                                 ///< message)
    const uint8_t *payload;      ///< header.length bytes
    uint32_t       header_bytes; ///< on the wire: 64, a segment's, or a
                                 ///< pack's up to its first payload
    bool     has_ride;           ///< an ACK rides behind the payload (kFlagRide)
    RideAck  ride;               ///< that ACK, checked for internal consistency
    uint32_t pack_count;         ///< a pack: its messages (PackReader); else 0
    bool     pack_ack_req;       ///< a pack asked for the ACK after its last
};

/// The messages of a pack that parse() accepted, in PSN order, each as the
/// one-packet SEND it stands for (the WireHeader it would have had alone:
/// FIRST and LAST, its PSN, AM id and length, the pack's ts_send, and the
/// pack's ACK_REQ on the last).
class PackReader {
public:
    explicit PackReader(const ParseResult &r);
    /// The next message; false after the last.
    bool next(WireHeader &h, const uint8_t *&payload);

private:
    const ParseResult &r_;
    const uint8_t     *at_; ///< the next message's PackMember (several)
    uint32_t           i_ = 0;
};

/// Validates a datagram of len bytes.
ParseResult parse(const uint8_t *bytes, size_t len);

/// Validates the header of a datagram of len bytes from its first head_len
/// bytes (a peek): reads no more than those; payload points past the header
/// as if the datagram were there, and a riding ACK beyond head_len is not
/// read (has_ride false).
ParseResult parse_header(const uint8_t *head, size_t head_len, size_t len);

/// Writes a pack's header (and ts_send when ts_send is not 0, with
/// kFlagStamp) to out; returns its bytes. The messages follow: for count 1
/// the payload alone (am_id names it), else a PackMember before each.
uint32_t encode_pack_header(uint8_t *out, uint8_t flags, uint32_t count, uint8_t am_id,
                            uint64_t token, uint32_t dst_qp, uint32_t psn, uint64_t ts_send);

/// Writes h (a WRITE or SEND segment, or a READ_RESP) as a SegHeader and
/// what follows it to out (stamped when h.ts_send is not 0; a FIRST's
/// length and target; a READ_RESP's offset and, on the FIRST, echo);
/// returns the bytes written, seg_header_bytes().
uint32_t encode_seg_header(const WireHeader &h, uint8_t *out);

/// Validates a header read apart from its payload (a peek), for a datagram
/// that carries payload_len bytes after it (a RideAck included).
/// parse() applies the same checks.
ParseStatus check_header(const WireHeader &h, size_t payload_len);

const char *parse_status_string(ParseStatus status);

} // namespace doorbell::udp
