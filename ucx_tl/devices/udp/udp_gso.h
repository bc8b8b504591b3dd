/*
 * UDP generic segmentation offload (UDP_SEGMENT, Linux 4.18+) on the send
 * path: a run of staged packets to one peer, all of one size (the last may
 * be shorter), leaves as one "super-datagram" that the kernel cuts into the
 * datagrams late (in the driver, or at the receiving socket on lo and veth):
 * one pass through the stack instead of one per packet. What is staged
 * together is what the window and the pacer released at once, so a run is
 * never more than the pacer allowed; GSO only changes how it is handed to
 * the kernel. Where the kernel refuses (no UDP_SEGMENT, a device without
 * checksum offload: EIO), the device falls back to one datagram per packet
 * for the rest of its life.
 *
 * On every iface, paced or not, and on every port of a multipath one: a run
 * is a port's packets to one peer in one flush (a probe staged for another
 * port between them leaves from that port and does not break it). On a
 * paced path that is what the pacer released at once (two segments on a
 * spine path, a time's worth on a host-near one; one at a time on a path
 * that congests), so super-datagrams follow the pacer and grow only where
 * the CPU, not a queue, limits the rate. The emulated fabric's hosts cut
 * them into datagrams on the way out, as a NIC does (USO): the switches
 * queue, mark and drop datagrams. An earlier try that sent whole runs on
 * a veth that passed them whole had its switch port drop and mark a run as
 * one packet (osu_bw 8-64 KiB across the spine at 11-13.5 MB/s against
 * 17-20 in datagrams).
 */
#pragma once

#include "core/doorbell_core.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>

namespace doorbell::udp {

static constexpr unsigned kGsoMaxSegments = 64;    ///< datagrams per super-datagram
static constexpr size_t   kGsoMaxBytes    = 65000; ///< bytes of one, headers included

/// What the grouping looks at in a staged packet.
struct GsoItem {
    size_t      bytes; ///< datagram bytes
    sockaddr_in to;
};

/// Datagrams of items[start..n) that leave as one super-datagram: the run of
/// packets to items[start].to whose sizes equal items[start].bytes, the last
/// one possibly shorter, at most kGsoMaxSegments and kGsoMaxBytes in all.
/// 1 when nothing groups (send it alone).
unsigned gso_run(const GsoItem *items, unsigned n, unsigned start);

/// Whether the kernel takes UDP_SEGMENT on this socket.
bool gso_supported(int fd);

/// Fills a control buffer of CMSG_SPACE(sizeof(uint16_t)) bytes with the
/// UDP_SEGMENT message for segments of size bytes; returns its length.
size_t gso_control(void *buf, uint16_t size);

/* Test seams (not production knobs): the system call a batch of datagrams
 * leaves through, and what the device did with GSO. */
using TxSyscall = int (*)(int fd, mmsghdr *msgs, unsigned int n, int flags);
void set_tx_syscall(doorbell_iface_t *iface, TxSyscall call); ///< nullptr: sendmmsg
/// Turns GSO off (or back on where the kernel takes it): before/after runs.
void set_gso(doorbell_iface_t *iface, bool on);

struct GsoStats {
    bool     enabled;   ///< super-datagrams are sent now
    uint64_t sends;     ///< super-datagrams the kernel took
    uint64_t segments;  ///< datagrams they carried
    uint64_t fallbacks; ///< times the kernel refused one (then disabled)
};
GsoStats gso_stats(const doorbell_iface_t *iface);

} // namespace doorbell::udp
