#include "udp_gro.h"

#include "udp_device.h"

#include <netinet/udp.h>

#include <cstring>

namespace doorbell::udp {

bool gro_enable(int fd)
{
    int on = 1;
    return setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0;
}

size_t gro_segment(const cmsghdr *c)
{
    if (c == nullptr || c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_GRO ||
        c->cmsg_len < CMSG_LEN(sizeof(int))) {
        return 0;
    }
    int size = 0;
    std::memcpy(&size, CMSG_DATA(c), sizeof(size));
    return size > 0 ? size_t(size) : 0;
}

size_t gro_whole_bytes(size_t len, size_t segment, bool truncated)
{
    if (!truncated) {
        return len;
    }
    return segment == 0 ? 0 : len / segment * segment;
}

void set_gro(doorbell_iface_t *iface, bool on)
{
    if (UdpIface *udp = udp_iface(iface)) {
        udp->set_gro(on);
    }
}

void set_rx_room(doorbell_iface_t *iface, size_t bytes)
{
    if (UdpIface *udp = udp_iface(iface)) {
        udp->set_rx_room(bytes);
    }
}

GroStats gro_stats(const doorbell_iface_t *iface)
{
    const UdpIface *udp = udp_iface(iface);
    return udp != nullptr ? udp->gro_stats() : GroStats{};
}

} // namespace doorbell::udp
