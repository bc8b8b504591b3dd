/* Verbs device, beyond the core's WQEs: a PUT_SIGNAL's needs (HCA atomics,
 * alignment) and the mlx5 export of a direct QP for GPU-initiated posting. */
#include "verbs_device.h"

#include "core/error.h"

#include <cstring>

#ifdef DOORBELL_VERBS_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace doorbell::verbs {

doorbell_status_t VerbsIface::check_raw_wqe(const VerbsQp &qp, const doorbell_wqe_t &w,
                                            unsigned index) const
{
    if (w.opcode != DOORBELL_OP_PUT_SIGNAL || w.am_id != DOORBELL_SIGNAL_ADD) {
        return DOORBELL_OK;
    }
    if (!atomics_) {
        return set_error(DOORBELL_ERR_UNSUPPORTED,
                         "%s: qp_post: WQE %u to peer %s: a PUT_SIGNAL ADD is "
                         "an RDMA fetch-add and this HCA has no atomics "
                         "(atomic_cap IBV_ATOMIC_NONE)",
                         name.c_str(), index, peer_string(qp.peer).c_str());
    }
    if (w.signal_addr % 8 != 0) {
        return set_error(DOORBELL_ERR_INVALID_PARAM,
                         "%s: qp_post: WQE %u to peer %s: the signal word of a "
                         "PUT_SIGNAL ADD (%#llx) is not 8-byte aligned, as RDMA "
                         "atomics need",
                         name.c_str(), index, peer_string(qp.peer).c_str(),
                         (unsigned long long)w.signal_addr);
    }
    return DOORBELL_OK;
}

doorbell_status_t VerbsIface::export_mlx5(VerbsQp &qp, doorbell_qp_mlx5_t &out)
{
    if (!qp.direct) {
        return set_error(DOORBELL_ERR_INVALID_PARAM,
                         "%s: export_mlx5: QP %u to %s was not created direct "
                         "(doorbell_qp_create_direct)",
                         name.c_str(), qp.qpn, peer_string(qp.peer).c_str());
    }
    if (prov_.mlx5_init_obj == nullptr || prov_.mlx5_is_supported == nullptr) {
        return set_error(DOORBELL_ERR_UNSUPPORTED,
                         "%s: built without mlx5 direct verbs "
                         "(infiniband/mlx5dv.h, libmlx5)",
                         name.c_str());
    }
    if (!prov_.mlx5_is_supported(ctx_->device)) {
        return set_error(DOORBELL_ERR_UNSUPPORTED, "%s: not an mlx5 device (mlx5dv_is_supported)",
                         name.c_str());
    }
    if (qp.in_error()) {
        return set_error(qp.error(), "%s: export_mlx5: QP %u to %s is in error", name.c_str(),
                         qp.qpn, peer_string(qp.peer).c_str());
    }
    if (qp.state != VerbsQp::State::kConnected) {
        return DOORBELL_ERR_NO_RESOURCE;
    }
#ifdef DOORBELL_VERBS_MLX5DV
    mlx5dv_qp  dq{};
    mlx5dv_cq  dc{};
    mlx5dv_obj obj{};
    obj.qp.in  = qp.qp;
    obj.qp.out = &dq;
    obj.cq.in  = ibv_cq_ex_to_cq(qp.direct_cq);
    obj.cq.out = &dc;
    int rc     = prov_.mlx5_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ);
    if (rc != 0) {
        return set_error(DOORBELL_ERR_IO, "%s: mlx5dv_init_obj(QP 0x%x) failed: %s", name.c_str(),
                         qp.qp->qp_num, strerror(rc));
    }
    auto pow2 = [](uint32_t v) { return v != 0 && (v & (v - 1)) == 0; };
    /* the GPU path writes one 64-byte block per WQE and a 16-bit index */
    if (dq.sq.stride != 64 || !pow2(dq.sq.wqe_cnt) || dq.sq.wqe_cnt > 32768 ||
        dq.dbrec == nullptr || dq.bf.reg == nullptr || dc.buf == nullptr || dc.dbrec == nullptr ||
        !pow2(dc.cqe_cnt) || (dc.cqe_size != 64 && dc.cqe_size != 128)) {
        return set_error(DOORBELL_ERR_UNSUPPORTED,
                         "%s: QP 0x%x has an mlx5 layout the GPU path does not "
                         "drive (sq stride %u, %u WQEs, cqe size %u, %u CQEs)",
                         name.c_str(), qp.qp->qp_num, dq.sq.stride, dq.sq.wqe_cnt, dc.cqe_size,
                         dc.cqe_cnt);
    }
    out            = {};
    out.sq_buf     = dq.sq.buf;
    out.sq_wqebbs  = dq.sq.wqe_cnt;
    out.qpn        = qp.qp->qp_num;
    out.dbrec      = reinterpret_cast<volatile uint32_t *>(dq.dbrec);
    out.uar        = dq.bf.reg;
    out.uar_size   = dq.bf.size;
    out.cqn        = dc.cqn;
    out.cq_buf     = dc.buf;
    out.cqe_cnt    = dc.cqe_cnt;
    out.cqe_size   = dc.cqe_size;
    out.cq_dbrec   = reinterpret_cast<volatile uint32_t *>(dc.dbrec);
    out.fetch_addr = uintptr_t(qp.scratch.get());
    out.fetch_lkey = qp.scratch_mr->lkey;
    return DOORBELL_OK;
#else
    (void)out;
    return set_error(DOORBELL_ERR_UNSUPPORTED, "%s: built without mlx5 direct verbs", name.c_str());
#endif
}

} // namespace doorbell::verbs
