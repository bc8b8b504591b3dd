/*
 * The C boundary (doorbell_core.h): argument checks, WQE construction, the
 * batching decision, and a static dispatch to the device of the iface.
 */
#include "doorbell_core.h"

#include "core/device.h"
#include "core/error.h"
#include "core/iface_core.h"
#include "core/protection_domain.h"

#include "devices/udp/udp_device.h"
#ifdef DOORBELL_HAVE_VERBS
#include "devices/verbs/verbs_device.h"
#endif

#include <type_traits>
#include <cstdlib>
#include <cstring>

using namespace doorbell;

namespace {

static_assert(Device<udp::UdpIface>);
#ifdef DOORBELL_HAVE_VERBS
static_assert(Device<verbs::VerbsIface>);
#endif

/// Calls fn with the iface as its device type.
template <class Fn>
decltype(auto) with_device(doorbell_iface_t *iface, Fn &&fn)
{
    switch (iface->kind) {
    case DOORBELL_DEVICE_UDP:
        return fn(static_cast<udp::UdpIface &>(*iface));
#ifdef DOORBELL_HAVE_VERBS
    case DOORBELL_DEVICE_VERBS:
        return fn(static_cast<verbs::VerbsIface &>(*iface));
#endif
    default:
        /* only this file creates ifaces: an unknown kind is memory
         * corruption, not input */
        abort();
    }
}

template <class Fn>
decltype(auto) with_qp(doorbell_qp_t *qp, Fn &&fn)
{
    QpCore &core = *static_cast<QpCore *>(qp);
    return with_device(&core.iface, [&](auto &dev) -> decltype(auto) {
        using Qp = typename std::remove_reference_t<decltype(dev)>::Qp;
        return fn(dev, static_cast<Qp &>(core));
    });
}

IfaceCore &core_of(const doorbell_iface_t *iface)
{
    return *static_cast<IfaceCore *>(const_cast<doorbell_iface_t *>(iface));
}

doorbell_iface_limits_t limits_of(doorbell_iface_t *iface)
{
    doorbell_iface_limits_t l;
    with_device(iface, [&](auto &dev) { dev.query_limits(l); });
    return l;
}

/// A direct QP's send queue belongs to another agent: the core posts nothing.
template <Device D>
doorbell_status_t refuse_direct(D &dev, const typename D::Qp &qp)
{
    if constexpr (requires { qp.direct; }) {
        if (qp.direct) {
            return set_error(DOORBELL_ERR_UNSUPPORTED,
                             "%s: QP %u is direct (its send queue is driven "
                             "through its mlx5 export): the CPU posts nothing to it",
                             dev.name.c_str(), qp.qpn);
        }
    }
    return DOORBELL_OK;
}

/// Posts one WQE built by fill(wqe, ctx) and lets the batcher decide.
template <Device D, class Fill>
doorbell_status_t post_one(D &dev, typename D::Qp &qp, bool force_signal, Fill &&fill)
{
    if (doorbell_status_t st = refuse_direct(dev, qp); st != DOORBELL_OK) {
        return st;
    }
    doorbell_status_t status = qp.can_post(1);
    if (status != DOORBELL_OK) {
        return status;
    }
    SlotContext    *ctx;
    doorbell_wqe_t &wqe = qp.prepare(&ctx);
    fill(wqe, *ctx);
    if (wqe.opcode == DOORBELL_OP_SEND) {
        ++qp.am_inflight;
    }
    qp.commit(force_signal);
    if (qp.ring_now()) {
        dev.ring(qp);
    }
    return DOORBELL_OK;
}

template <Device D>
doorbell_status_t check_am(D &dev, typename D::Qp &qp, size_t length, size_t max, const char *op)
{
    if (length > max) {
        return set_error(DOORBELL_ERR_INVALID_PARAM, "%s: %s of %zu bytes exceeds %zu",
                         dev.name.c_str(), op, length, max);
    }
    if (qp.am_inflight >= dev.params.am_credits) {
        return DOORBELL_ERR_NO_RESOURCE;
    }
    return DOORBELL_OK;
}

/// Posts a zcopy put or get: one WQE per iov entry at consecutive remote
/// addresses, the last one carrying the cookie.
template <Device D>
doorbell_status_t post_zcopy(D &dev, typename D::Qp &qp, uint8_t opcode, const struct iovec *iov,
                             size_t iovcnt, uint64_t remote_addr, uint32_t rkey, void *cookie)
{
    if (doorbell_status_t st = refuse_direct(dev, qp); st != DOORBELL_OK) {
        return st;
    }
    doorbell_iface_limits_t l;
    dev.query_limits(l);
    size_t total = 0;
    for (size_t i = 0; i < iovcnt; ++i) {
        total += iov[i].iov_len;
    }
    if (iovcnt > l.max_iov || total > l.max_zcopy || (iovcnt != 0 && iov == nullptr)) {
        return set_error(DOORBELL_ERR_INVALID_PARAM,
                         "%s: zcopy of %zu entries / %zu bytes exceeds %zu / %zu", dev.name.c_str(),
                         iovcnt, total, l.max_iov, l.max_zcopy);
    }
    unsigned          count  = iovcnt ? unsigned(iovcnt) : 1;
    doorbell_status_t status = qp.can_post(count);
    if (status != DOORBELL_OK) {
        return status;
    }
    uint64_t offset = 0;
    for (unsigned i = 0; i < count; ++i) {
        SlotContext    *ctx;
        doorbell_wqe_t &wqe = qp.prepare(&ctx);
        wqe.opcode          = opcode;
        wqe.rkey            = rkey;
        wqe.remote_addr     = remote_addr + offset;
        if (iovcnt != 0) {
            wqe.local_addr = uintptr_t(iov[i].iov_base);
            wqe.length     = uint32_t(iov[i].iov_len);
        }
        offset += wqe.length;
        bool last = i + 1 == count;
        if (last) {
            ctx->kind   = SlotKind::kCookie;
            ctx->cookie = cookie;
        }
        qp.commit(last);
    }
    if (qp.ring_now()) {
        dev.ring(qp);
    }
    return DOORBELL_INPROGRESS;
}

bool valid_raw_wqe(const doorbell_wqe_t &w, uint32_t seg_size)
{
    if ((w.flags & ~unsigned(DOORBELL_WQE_SIGNALED | DOORBELL_WQE_INLINE | DOORBELL_WQE_FENCE)) !=
        0) {
        return false;
    }
    if ((w.flags & DOORBELL_WQE_INLINE) && w.inline_len > DOORBELL_WQE_INLINE_MAX) {
        return false;
    }
    uint32_t len = (w.flags & DOORBELL_WQE_INLINE) ? w.inline_len : w.length;
    switch (w.opcode) {
    case DOORBELL_OP_NOP:
        return true;
    case DOORBELL_OP_PUT:
        return true;
    case DOORBELL_OP_GET:
        return !(w.flags & DOORBELL_WQE_INLINE);
    case DOORBELL_OP_SEND:
        return len <= seg_size;
    case DOORBELL_OP_PUT_SIGNAL: /* an unknown signal op: UNSUPPORTED */
        return w.am_id <= DOORBELL_SIGNAL_ADD;
    default:
        return false;
    }
}

} // namespace

/* ------------------------------------------------------------- devices */

extern "C" int doorbell_query_devices(doorbell_device_info_t *devices, int max)
{
    int count = udp::query_devices(devices, devices ? max : 0);
#ifdef DOORBELL_HAVE_VERBS
    int room = (devices != nullptr && max > count) ? max - count : 0;
    count += verbs::query_devices(room ? devices + count : nullptr, room);
#endif
    return count;
}

/* ---------------------------------------------------- protection domain */

extern "C" doorbell_status_t doorbell_pd_create(doorbell_pd_t **pd_p)
{
    *pd_p = new ProtectionDomain();
    return DOORBELL_OK;
}

extern "C" void doorbell_pd_destroy(doorbell_pd_t *pd)
{
    delete static_cast<ProtectionDomain *>(pd);
}

extern "C" doorbell_status_t doorbell_mr_register(doorbell_pd_t *pd, void *address, size_t length,
                                                  unsigned access, doorbell_mr_t **mr_p,
                                                  uint32_t *rkey_p)
{
    return static_cast<ProtectionDomain *>(pd)->register_region(address, length, access, mr_p,
                                                                rkey_p);
}

extern "C" doorbell_status_t doorbell_mr_deregister(doorbell_pd_t *pd, doorbell_mr_t *mr)
{
    return static_cast<ProtectionDomain *>(pd)->deregister_region(mr);
}

/* ---------------------------------------------------------------- iface */

extern "C" doorbell_status_t doorbell_iface_open(doorbell_pd_t                 *pd,
                                                 const doorbell_iface_params_t *params,
                                                 doorbell_iface_t             **iface_p)
{
    if (pd == nullptr || params == nullptr) {
        return set_error(DOORBELL_ERR_INVALID_PARAM,
                         "iface_open: no protection domain or parameters");
    }
    if (doorbell_status_t st = doorbell_iface_params_check(params, ""); st != DOORBELL_OK) {
        return st; /* the message names the parameter, its value and its range */
    }
#ifdef DOORBELL_HAVE_VERBS
    if (params->device != nullptr && verbs::is_verbs_name(params->device)) {
        verbs::VerbsIface *viface;
        doorbell_status_t  vstatus = verbs::VerbsIface::open(*static_cast<ProtectionDomain *>(pd),
                                                             *params, &viface);
        if (vstatus == DOORBELL_OK) {
            *iface_p = viface;
        }
        return vstatus;
    }
#endif
    udp::UdpIface    *iface;
    doorbell_status_t status = udp::UdpIface::open(*static_cast<ProtectionDomain *>(pd), *params,
                                                   &iface);
    if (status == DOORBELL_OK) {
        *iface_p = iface;
    }
    return status;
}

extern "C" void doorbell_iface_close(doorbell_iface_t *iface)
{
    if (iface != nullptr) {
        with_device(iface, [](auto &dev) { delete &dev; });
    }
}

extern "C" size_t doorbell_iface_device_address_length(const doorbell_iface_t *iface)
{
    return with_device(const_cast<doorbell_iface_t *>(iface),
                       [](auto &dev) { return dev.device_address_length(); });
}

extern "C" size_t doorbell_iface_address_length(const doorbell_iface_t *iface)
{
    return with_device(const_cast<doorbell_iface_t *>(iface),
                       [](auto &dev) { return dev.address_length(); });
}

extern "C" void doorbell_iface_get_device_address(const doorbell_iface_t *iface, void *addr)
{
    with_device(const_cast<doorbell_iface_t *>(iface),
                [&](auto &dev) { dev.get_device_address(addr); });
}

extern "C" void doorbell_iface_get_address(const doorbell_iface_t *iface, void *addr)
{
    with_device(const_cast<doorbell_iface_t *>(iface), [&](auto &dev) { dev.get_address(addr); });
}

extern "C" int doorbell_iface_is_reachable(const doorbell_iface_t *iface, const void *device_addr,
                                           const void *iface_addr)
{
    if (device_addr == nullptr) {
        return 0;
    }
    return with_device(const_cast<doorbell_iface_t *>(iface),
                       [&](auto &dev) { return int(dev.is_reachable(device_addr, iface_addr)); });
}

extern "C" void doorbell_iface_query_limits(const doorbell_iface_t  *iface,
                                            doorbell_iface_limits_t *limits)
{
    *limits = limits_of(const_cast<doorbell_iface_t *>(iface));
}

extern "C" unsigned doorbell_iface_progress(doorbell_iface_t *iface)
{
    ++core_of(iface).progress_calls;
    return with_device(iface, [](auto &dev) { return dev.progress(); });
}

extern "C" unsigned doorbell_iface_progress_background(doorbell_iface_t *iface)
{
    IfaceCore &core = core_of(iface);
    core.background = true;
    unsigned count  = with_device(iface, [](auto &dev) { return dev.progress(); });
    core.background = false;
    return count;
}

extern "C" int doorbell_iface_event_fd(const doorbell_iface_t *iface)
{
    return with_device(const_cast<doorbell_iface_t *>(iface),
                       [](auto &dev) { return dev.event_fd(); });
}

extern "C" doorbell_status_t doorbell_iface_arm(doorbell_iface_t *iface)
{
    return with_device(iface, [](auto &dev) { return dev.arm(); });
}

extern "C" void doorbell_iface_set_am_handler(doorbell_iface_t *iface, doorbell_am_cb_t cb,
                                              void *arg)
{
    core_of(iface).am_cb  = cb;
    core_of(iface).am_arg = arg;
}

extern "C" void doorbell_iface_release_am(doorbell_iface_t *iface, void *data)
{
    with_device(iface, [&](auto &dev) { dev.release_am(data); });
}

extern "C" void doorbell_iface_set_completion_handler(doorbell_iface_t        *iface,
                                                      doorbell_completion_cb_t cb)
{
    core_of(iface).completion_cb     = cb;
    core_of(iface).completion_arg_cb = nullptr;
}

extern "C" void doorbell_iface_set_completion_handler_arg(doorbell_iface_t            *iface,
                                                          doorbell_completion_arg_cb_t cb,
                                                          void                        *arg)
{
    core_of(iface).completion_arg_cb = cb;
    core_of(iface).completion_arg    = arg;
    core_of(iface).completion_cb     = nullptr;
}

extern "C" void doorbell_iface_set_error_handler(doorbell_iface_t *iface, doorbell_qp_error_cb_t cb,
                                                 void *arg)
{
    core_of(iface).error_cb  = cb;
    core_of(iface).error_arg = arg;
}

extern "C" int doorbell_qp_can_send(const doorbell_qp_t *qp)
{
    const QpCore &core = *static_cast<const QpCore *>(qp);
    return !core.in_error() && core.ring.free_slots() > 0 &&
           core.am_inflight < core.iface.params.am_credits;
}

extern "C" doorbell_status_t doorbell_iface_flush(doorbell_iface_t *iface, void *cookie)
{
    IfaceCore &core = core_of(iface);
    for (QpCore *qp : core.qps) {
        if (!qp->idle() && !qp->in_error() && qp->ring.free_slots() == 0) {
            return DOORBELL_ERR_NO_RESOURCE;
        }
    }
    auto *group = new FlushGroup{cookie, 0, DOORBELL_OK};
    with_device(iface, [&](auto &dev) {
        using Qp = typename std::remove_reference_t<decltype(dev)>::Qp;
        for (QpCore *qp : core.qps) {
            if (qp->in_error()) {
                continue;
            }
            if (qp->post_flush(SlotKind::kFlushGroup, group) == DOORBELL_INPROGRESS) {
                ++group->remaining;
                dev.ring(static_cast<Qp &>(*qp));
            }
        }
    });
    if (group->remaining == 0) {
        delete group;
        return DOORBELL_OK;
    }
    return DOORBELL_INPROGRESS;
}

extern "C" void doorbell_iface_get_counters(const doorbell_iface_t *iface,
                                            doorbell_counters_t    *counters)
{
    *counters = core_of(iface).counters;
}

extern "C" void doorbell_iface_set_stats(doorbell_iface_t *iface, int enable)
{
    core_of(iface).stats = enable != 0;
}

/* ----------------------------------------------------------- queue pair */

extern "C" doorbell_status_t doorbell_qp_create(doorbell_iface_t *iface, const void *device_addr,
                                                const void *iface_addr, doorbell_qp_t **qp_p)
{
    return with_device(iface, [&](auto &dev) {
        using Qp = typename std::remove_reference_t<decltype(dev)>::Qp;
        Qp               *qp;
        doorbell_status_t status = dev.create_qp(device_addr, iface_addr, &qp);
        if (status == DOORBELL_OK) {
            *qp_p = qp;
        }
        return status;
    });
}

extern "C" void doorbell_qp_destroy(doorbell_qp_t *qp)
{
    if (qp != nullptr) {
        with_qp(qp, [](auto &dev, auto &q) { dev.destroy_qp(q); });
    }
}

extern "C" doorbell_status_t doorbell_qp_check(doorbell_qp_t *qp)
{
    return with_qp(qp, [&](auto &dev, auto &q) -> doorbell_status_t {
        if constexpr (requires { dev.check_qp(q); }) {
            return dev.check_qp(q);
        } else {
            /* an RC NIC checks its peer when it has work: a signaled
             * zero-length operation completes, or fails the QP when the
             * peer does not answer its retries */
            doorbell_status_t status = q.can_post(1);
            if (status != DOORBELL_OK) {
                return status;
            }
            SlotContext    *ctx;
            doorbell_wqe_t &w = q.prepare(&ctx);
            w.opcode          = DOORBELL_OP_NOP;
            q.commit(true);
            dev.ring(q);
            return DOORBELL_OK;
        }
    });
}

extern "C" doorbell_status_t doorbell_qp_am_short(doorbell_qp_t *qp, uint8_t am_id, uint64_t header,
                                                  const void *payload, size_t length)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        size_t            total  = sizeof(header) + length;
        doorbell_status_t status = check_am(dev, q, total, limits_of(&dev).max_short, "am_short");
        if (status != DOORBELL_OK) {
            return status;
        }
        return post_one(dev, q, false, [&](doorbell_wqe_t &w, SlotContext &c) {
            uint8_t *buf = q.bounce(c);
            std::memcpy(buf, &header, sizeof(header));
            if (length != 0) {
                std::memcpy(buf + sizeof(header), payload, length);
            }
            w.opcode     = DOORBELL_OP_SEND;
            w.am_id      = am_id;
            w.local_addr = uintptr_t(buf);
            w.length     = uint32_t(total);
        });
    });
}

extern "C" ssize_t doorbell_qp_am_bcopy(doorbell_qp_t *qp, uint8_t am_id, doorbell_pack_cb_t pack,
                                        void *arg)
{
    return with_qp(qp, [&](auto &dev, auto &q) -> ssize_t {
        doorbell_status_t status = check_am(dev, q, 0, 0, "am_bcopy");
        if (status != DOORBELL_OK) {
            return status;
        }
        size_t packed = 0;
        status        = post_one(dev, q, false, [&](doorbell_wqe_t &w, SlotContext &c) {
            uint8_t *buf = q.bounce(c);
            packed       = pack(buf, arg);
            w.opcode     = DOORBELL_OP_SEND;
            w.am_id      = am_id;
            w.local_addr = uintptr_t(buf);
            w.length     = uint32_t(packed);
        });
        return status == DOORBELL_OK ? ssize_t(packed) : ssize_t(status);
    });
}

extern "C" doorbell_status_t doorbell_qp_am_zcopy(doorbell_qp_t *qp, uint8_t am_id,
                                                  const void *header, size_t header_length,
                                                  const struct iovec *iov, size_t iovcnt,
                                                  void *cookie)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        size_t total = header_length;
        for (size_t i = 0; i < iovcnt; ++i) {
            total += iov[i].iov_len;
        }
        doorbell_iface_limits_t l = limits_of(&dev);
        if (header_length > l.max_am_header) {
            return set_error(DOORBELL_ERR_INVALID_PARAM,
                             "%s: am_zcopy header of %zu bytes exceeds %zu", dev.name.c_str(),
                             header_length, l.max_am_header);
        }
        doorbell_status_t status = check_am(dev, q, total, l.max_am_zcopy, "am_zcopy");
        if (status != DOORBELL_OK) {
            return status;
        }
        /* an AM is at most seg_size bytes: gathering it into the slot's
         * bounce buffer costs less than a second iovec per segment */
        status = post_one(dev, q, true, [&](doorbell_wqe_t &w, SlotContext &c) {
            uint8_t *buf = q.bounce(c);
            size_t   off = header_length;
            if (header_length != 0) {
                std::memcpy(buf, header, header_length);
            }
            for (size_t i = 0; i < iovcnt; ++i) {
                std::memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
                off += iov[i].iov_len;
            }
            w.opcode     = DOORBELL_OP_SEND;
            w.am_id      = am_id;
            w.local_addr = uintptr_t(buf);
            w.length     = uint32_t(total);
            c.kind       = SlotKind::kCookie;
            c.cookie     = cookie;
        });
        return status == DOORBELL_OK ? DOORBELL_INPROGRESS : status;
    });
}

extern "C" doorbell_status_t doorbell_qp_put_short(doorbell_qp_t *qp, const void *buffer,
                                                   size_t length, uint64_t remote_addr,
                                                   uint32_t rkey)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        size_t max = limits_of(&dev).max_short;
        if (length > max) {
            return set_error(DOORBELL_ERR_INVALID_PARAM, "%s: put_short of %zu bytes exceeds %zu",
                             dev.name.c_str(), length, max);
        }
        return post_one(dev, q, false, [&](doorbell_wqe_t &w, SlotContext &c) {
            uint8_t *buf = q.bounce(c);
            if (length != 0) {
                std::memcpy(buf, buffer, length);
            }
            w.opcode      = DOORBELL_OP_PUT;
            w.rkey        = rkey;
            w.remote_addr = remote_addr;
            w.local_addr  = uintptr_t(buf);
            w.length      = uint32_t(length);
        });
    });
}

extern "C" ssize_t doorbell_qp_put_bcopy(doorbell_qp_t *qp, doorbell_pack_cb_t pack, void *arg,
                                         uint64_t remote_addr, uint32_t rkey)
{
    return with_qp(qp, [&](auto &dev, auto &q) -> ssize_t {
        size_t            packed = 0;
        doorbell_status_t status = post_one(dev, q, false, [&](doorbell_wqe_t &w, SlotContext &c) {
            uint8_t *buf  = q.bounce(c);
            packed        = pack(buf, arg);
            w.opcode      = DOORBELL_OP_PUT;
            w.rkey        = rkey;
            w.remote_addr = remote_addr;
            w.local_addr  = uintptr_t(buf);
            w.length      = uint32_t(packed);
        });
        return status == DOORBELL_OK ? ssize_t(packed) : ssize_t(status);
    });
}

extern "C" doorbell_status_t doorbell_qp_put_zcopy(doorbell_qp_t *qp, const struct iovec *iov,
                                                   size_t iovcnt, uint64_t remote_addr,
                                                   uint32_t rkey, void *cookie)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        return post_zcopy(dev, q, DOORBELL_OP_PUT, iov, iovcnt, remote_addr, rkey, cookie);
    });
}

extern "C" doorbell_status_t doorbell_qp_get_bcopy(doorbell_qp_t *qp, doorbell_unpack_cb_t unpack,
                                                   void *arg, size_t length, uint64_t remote_addr,
                                                   uint32_t rkey, void *cookie)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        size_t max = limits_of(&dev).max_bcopy;
        if (length > max) {
            return set_error(DOORBELL_ERR_INVALID_PARAM, "%s: get_bcopy of %zu bytes exceeds %zu",
                             dev.name.c_str(), length, max);
        }
        doorbell_status_t status = post_one(dev, q, true, [&](doorbell_wqe_t &w, SlotContext &c) {
            w.opcode      = DOORBELL_OP_GET;
            w.rkey        = rkey;
            w.remote_addr = remote_addr;
            w.local_addr  = uintptr_t(q.bounce(c));
            w.length      = uint32_t(length);
            c.kind        = SlotKind::kGetBcopy;
            c.cookie      = cookie;
            c.unpack      = unpack;
            c.unpack_arg  = arg;
        });
        return status == DOORBELL_OK ? DOORBELL_INPROGRESS : status;
    });
}

extern "C" doorbell_status_t doorbell_qp_get_zcopy(doorbell_qp_t *qp, const struct iovec *iov,
                                                   size_t iovcnt, uint64_t remote_addr,
                                                   uint32_t rkey, void *cookie)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        return post_zcopy(dev, q, DOORBELL_OP_GET, iov, iovcnt, remote_addr, rkey, cookie);
    });
}

namespace {

const char *atomic_name(doorbell_atomic_op_t op)
{
    static const char *const names[] = {"add", "and", "or", "xor", "swap", "compare-and-swap"};
    return unsigned(op) < DOORBELL_ATOMIC_LAST ? names[op] : "?";
}

} // namespace

extern "C" doorbell_status_t doorbell_qp_atomic(doorbell_qp_t *qp, doorbell_atomic_op_t op,
                                                unsigned size, uint64_t operand, uint64_t compare,
                                                uint64_t remote_addr, uint32_t rkey,
                                                uint64_t *result, void *cookie)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        if (unsigned(op) >= DOORBELL_ATOMIC_LAST || (size != 4 && size != 8)) {
            return set_error(DOORBELL_ERR_INVALID_PARAM,
                             "%s: atomic operation %u on %u bytes: no such atomic",
                             dev.name.c_str(), unsigned(op), size);
        }
        doorbell_iface_limits_t l = limits_of(&dev);
        if (!(l.atomic_ops & (1u << op)) || !(l.atomic_sizes & size)) {
            return set_error(DOORBELL_ERR_UNSUPPORTED,
                             "%s: the device executes no %u-byte atomic %s (its atomics: ops "
                             "0x%x, sizes 0x%x%s)",
                             dev.name.c_str(), size, atomic_name(op), l.atomic_ops, l.atomic_sizes,
                             l.atomic_ops == 0 ? ", none" : "");
        }
        if (remote_addr % size != 0) {
            return set_error(DOORBELL_ERR_INVALID_PARAM,
                             "%s: atomic %s at 0x%llx: not aligned to its %u bytes",
                             dev.name.c_str(), atomic_name(op), (unsigned long long)remote_addr,
                             size);
        }
        if (q.atomics_inflight >= DOORBELL_MAX_ATOMICS_INFLIGHT) {
            return DOORBELL_ERR_NO_RESOURCE;
        }
        uint64_t          mask   = size == 8 ? ~uint64_t(0) : uint64_t(UINT32_MAX);
        doorbell_status_t status = post_one(dev, q, true, [&](doorbell_wqe_t &w, SlotContext &c) {
            w.opcode         = DOORBELL_OP_ATOMIC;
            w.am_id          = uint8_t(op);
            w.length         = size;
            w.rkey           = rkey;
            w.remote_addr    = remote_addr;
            w.local_addr     = uintptr_t(result);
            w.atomic_operand = operand & mask;
            w.atomic_compare = op == DOORBELL_ATOMIC_CSWAP ? compare & mask : 0;
            c.kind           = SlotKind::kCookie;
            c.cookie         = cookie;
            ++q.atomics_inflight; /* before the doorbell: it may complete */
        });
        return status == DOORBELL_OK ? DOORBELL_INPROGRESS : status;
    });
}

extern "C" doorbell_status_t doorbell_qp_post(doorbell_qp_t *qp, const doorbell_wqe_t *wqes,
                                              unsigned count)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        unsigned sends = 0;
        if (doorbell_status_t st = refuse_direct(dev, q); st != DOORBELL_OK) {
            return st;
        }
        /* PUT_SIGNAL: the UDP device executes it; the verbs device posts
         * the write and then the signal (a write or a fetch-add) and checks
         * what that needs (check_raw_wqe) */
        for (unsigned i = 0; i < count; ++i) {
            if (!valid_raw_wqe(wqes[i], dev.params.seg_size)) {
                return set_error(wqes[i].opcode == DOORBELL_OP_PUT_SIGNAL ?
                                     DOORBELL_ERR_UNSUPPORTED :
                                     DOORBELL_ERR_INVALID_PARAM,
                                 "%s: qp_post: WQE %u (opcode %u, flags 0x%x) "
                                 "is not supported by this device",
                                 dev.name.c_str(), i, wqes[i].opcode, wqes[i].flags);
            }
            if constexpr (requires { dev.check_raw_wqe(q, wqes[i], i); }) {
                doorbell_status_t st = dev.check_raw_wqe(q, wqes[i], i);
                if (st != DOORBELL_OK) {
                    return st;
                }
            }
            sends += wqes[i].opcode == DOORBELL_OP_SEND;
        }
        doorbell_status_t status = q.can_post(count);
        if (status != DOORBELL_OK) {
            return status;
        }
        if (q.am_inflight + sends > dev.params.am_credits) {
            return DOORBELL_ERR_NO_RESOURCE;
        }
        for (unsigned i = 0; i < count; ++i) {
            SlotContext    *ctx;
            doorbell_wqe_t &w = q.prepare(&ctx);
            w                 = wqes[i];
            bool signaled     = (w.flags & DOORBELL_WQE_SIGNALED) != 0;
            if (signaled && !(w.flags & DOORBELL_WQE_INLINE) && w.wr_id != 0) {
                ctx->kind   = SlotKind::kCookie;
                ctx->cookie = reinterpret_cast<void *>(uintptr_t(w.wr_id));
            }
            q.commit(signaled);
        }
        q.am_inflight += sends;
        if (q.ring_now()) {
            dev.ring(q);
        }
        return DOORBELL_OK;
    });
}

extern "C" doorbell_status_t doorbell_qp_flush(doorbell_qp_t *qp, void *cookie)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        doorbell_status_t status = q.post_flush(SlotKind::kFlush, cookie);
        if (status == DOORBELL_INPROGRESS) {
            dev.ring(q); /* a flush never waits for the batcher */
        }
        return status;
    });
}

extern "C" doorbell_status_t doorbell_qp_fence(doorbell_qp_t *qp)
{
    QpCore &core = *static_cast<QpCore *>(qp);
    if (core.in_error()) {
        return DOORBELL_ERR_CANCELED;
    }
    if (!core.idle()) {
        core.fence_next = true;
    }
    return DOORBELL_OK;
}

/* ------------------------------------------- direct send queues (mlx5) */

extern "C" uint32_t doorbell_mr_local_key(const doorbell_mr_t *mr)
{
#ifdef DOORBELL_HAVE_VERBS
    /* only the verbs device attaches hardware keys (an ibv_mr) */
    if (mr != nullptr && mr->hw != nullptr) {
        return static_cast<const ibv_mr *>(mr->hw)->lkey;
    }
#endif
    (void)mr;
    return 0;
}

extern "C" doorbell_status_t doorbell_qp_create_direct(doorbell_iface_t *iface,
                                                       const void       *device_addr,
                                                       const void *iface_addr, doorbell_qp_t **qp_p)
{
    return with_device(iface, [&](auto &dev) {
        using Qp = typename std::remove_reference_t<decltype(dev)>::Qp;
        if constexpr (requires(Qp * q) { dev.create_direct_qp(device_addr, iface_addr, &q); }) {
            Qp               *qp;
            doorbell_status_t status = dev.create_direct_qp(device_addr, iface_addr, &qp);
            if (status == DOORBELL_OK) {
                *qp_p = qp;
            }
            return status;
        } else {
            return set_error(DOORBELL_ERR_UNSUPPORTED,
                             "%s: direct send queues exist on verbs devices "
                             "only (on this device the GPU ring is the send "
                             "queue)",
                             dev.name.c_str());
        }
    });
}

extern "C" doorbell_status_t doorbell_qp_export_mlx5(doorbell_qp_t *qp, doorbell_qp_mlx5_t *mlx5)
{
    return with_qp(qp, [&](auto &dev, auto &q) {
        if constexpr (requires { dev.export_mlx5(q, *mlx5); }) {
            return dev.export_mlx5(q, *mlx5);
        } else {
            return set_error(DOORBELL_ERR_UNSUPPORTED,
                             "%s: no mlx5 send queue to export (not a verbs "
                             "device)",
                             dev.name.c_str());
        }
    });
}
