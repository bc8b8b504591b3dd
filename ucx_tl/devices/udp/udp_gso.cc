/* UDP device, GSO on the send path: which staged packets group into one
 * super-datagram, the control message that asks the kernel to cut it, and
 * the test seams (udp_gso.h). The send itself is flush_tx's. */
#include "udp_gso.h"

#include "udp_device.h"

#include <netinet/udp.h>

#include <cstring>

namespace doorbell::udp {

unsigned gso_run(const GsoItem *items, unsigned n, unsigned start)
{
    const GsoItem &first = items[start];
    size_t         total = first.bytes;
    unsigned       run   = 1;
    while (start + run < n && run < kGsoMaxSegments) {
        const GsoItem &next = items[start + run];
        if (!same_peer(next.to, first.to) || next.bytes > first.bytes || next.bytes == 0 ||
            total + next.bytes > kGsoMaxBytes) {
            break;
        }
        total += next.bytes;
        ++run;
        if (next.bytes < first.bytes) {
            break; /* a shorter one ends the run: the kernel cuts equal pieces */
        }
    }
    return run;
}

bool gso_supported(int fd)
{
    int       size = 0;
    socklen_t len  = sizeof(size);
    return getsockopt(fd, SOL_UDP, UDP_SEGMENT, &size, &len) == 0;
}

size_t gso_control(void *buf, uint16_t size)
{
    std::memset(buf, 0, CMSG_SPACE(sizeof(uint16_t)));
    auto *c       = static_cast<cmsghdr *>(buf);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type  = UDP_SEGMENT;
    c->cmsg_len   = CMSG_LEN(sizeof(uint16_t));
    std::memcpy(CMSG_DATA(c), &size, sizeof(size));
    return CMSG_SPACE(sizeof(uint16_t));
}

void set_tx_syscall(doorbell_iface_t *iface, TxSyscall call)
{
    if (UdpIface *udp = udp_iface(iface)) {
        udp->set_tx_syscall(call);
    }
}

void set_gso(doorbell_iface_t *iface, bool on)
{
    if (UdpIface *udp = udp_iface(iface)) {
        udp->set_gso(on);
    }
}

GsoStats gso_stats(const doorbell_iface_t *iface)
{
    const UdpIface *udp = udp_iface(iface);
    return udp != nullptr ? udp->gso_stats() : GsoStats{};
}

} // namespace doorbell::udp
