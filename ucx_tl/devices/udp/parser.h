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
                                 ///< DataHeader comes expanded)
    const uint8_t *payload;      ///< header.length bytes
    uint32_t       header_bytes; ///< on the wire: 64, or a DataHeader's
    bool           has_ride;     ///< an ACK rides behind the payload (kFlagRide)
    RideAck        ride;         ///< that ACK, checked for internal consistency
};

/// Validates a datagram of len bytes.
ParseResult parse(const uint8_t *bytes, size_t len);

/// Validates the header of a datagram of len bytes from its first head_len
/// bytes (a peek): reads no more than those; payload points past the header
/// as if the datagram were there, and a riding ACK beyond head_len is not
/// read (has_ride false).
ParseResult parse_header(const uint8_t *head, size_t head_len, size_t len);

/// Writes h (a WRITE or SEND segment, or a READ_RESP) as a DataHeader and
/// what follows it to out; returns the bytes written,
/// data_header_bytes(h.opcode).
uint32_t encode_data_header(const WireHeader &h, uint8_t *out);

/// Validates a header read apart from its payload (a peek), for a datagram
/// that carries payload_len bytes after it (a RideAck included).
/// parse() applies the same checks.
ParseStatus check_header(const WireHeader &h, size_t payload_len);

const char *parse_status_string(ParseStatus status);

} // namespace doorbell::udp
