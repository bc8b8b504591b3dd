/*
 * UDP generic receive offload (UDP_GRO, Linux 5.0+) on the receive path: the
 * kernel hands the socket a run of datagrams of one flow as one buffer, each
 * of the size its control message names but the last, which may be shorter.
 * On lo (and veth) a super-datagram sent with UDP_SEGMENT (udp_gso.h) then
 * reaches the socket whole instead of being cut into datagrams at the
 * socket's queue: one pass through the receive path and one receive entry
 * per run instead of one per datagram. A NIC (or veth with NAPI) that merges
 * the datagrams of a flow hands over the same kind of buffer; it merges only
 * datagrams with equal IP headers, so one TOS byte (the CE mark) holds for
 * every datagram of a buffer.
 *
 * The device splits a buffer into its datagrams and handles each as if it
 * had come alone; the first may be lent to the AM handler in place, the
 * others follow in the same buffer (as a pack's messages do). It turns GRO
 * on with CE reading, when bulk traffic arrives (enable_bulk_receive): a
 * latency-bound exchange keeps its cheaper receive call without control
 * messages. Where the kernel refuses the option, nothing changes.
 */
#pragma once

#include "core/doorbell_core.h"

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace doorbell::udp {

/// Turns UDP_GRO on for a socket; false where the kernel refuses it.
bool gro_enable(int fd);

/// The datagram size of a received buffer (bytes) if c is the kernel's
/// UDP_GRO control message for it, otherwise 0.
size_t gro_segment(const cmsghdr *c);

/// Bytes of a received buffer of len bytes, cut into datagrams of segment
/// bytes, that hold whole datagrams: all of them, or, when the buffer was
/// truncated (MSG_TRUNC), the whole segments only (the rest is lost and
/// resent).
size_t gro_whole_bytes(size_t len, size_t segment, bool truncated);

/* Test seams (not production knobs): GRO on now (where the kernel takes
 * it), or never, for an iface that has not turned it on yet; the bytes a
 * receive may fill, to truncate merged buffers (between progress calls). */
void set_gro(doorbell_iface_t *iface, bool on);
void set_rx_room(doorbell_iface_t *iface, size_t bytes);

struct GroStats {
    bool     enabled;   ///< the socket takes merged buffers now
    uint64_t buffers;   ///< buffers of two or more datagrams received
    uint64_t segments;  ///< datagrams they held
    uint64_t truncated; ///< buffers cut short by the receive buffer
};
GroStats gro_stats(const doorbell_iface_t *iface);

} // namespace doorbell::udp
