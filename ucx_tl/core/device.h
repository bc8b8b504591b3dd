/*
 * The compile-time device interface. A device provides an iface type derived
 * from IfaceCore with a QP type derived from QpCore; the C API dispatches on
 * the iface's kind once per call and everything below is static calls.
 */
#pragma once

#include "iface_core.h"

#include <concepts>
#include <cstddef>

namespace doorbell {

template <class D>
concept Device = std::derived_from<D, IfaceCore> && std::derived_from<typename D::Qp, QpCore> &&
    requires(D &d, const D &cd, typename D::Qp &qp, const void *addr, void *out,
             typename D::Qp **qp_p, doorbell_iface_limits_t &limits)
{
    {
        D::kKind
        } -> std::convertible_to<doorbell_device_kind_t>;
    {
        d.create_qp(addr, addr, qp_p)
        } -> std::same_as<doorbell_status_t>;
    {d.destroy_qp(qp)};
    /* the doorbell: WQEs up to the ring's tail are the device's */
    {d.ring(qp)};
    {
        d.progress()
        } -> std::same_as<unsigned>;
    {
        d.arm()
        } -> std::same_as<doorbell_status_t>;
    {
        cd.event_fd()
        } -> std::same_as<int>;
    {d.release_am(out)};
    {
        cd.device_address_length()
        } -> std::same_as<size_t>;
    {
        cd.address_length()
        } -> std::same_as<size_t>;
    {cd.get_device_address(out)};
    {cd.get_address(out)};
    {
        cd.is_reachable(addr, addr)
        } -> std::same_as<bool>;
    {cd.query_limits(limits)};
};

} // namespace doorbell
