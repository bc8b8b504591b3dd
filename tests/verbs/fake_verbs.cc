#include "fake_verbs.h"

#include "core/clock.h"

#include <arpa/inet.h>
#include <endian.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#ifdef DOORBELL_VERBS_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace doorbell::verbs::fake {

namespace {
Fabric *g_fabric = nullptr;
}

struct Entry {
    uint64_t      wr_id;
    ibv_wc_status status;
    ibv_wc_opcode opcode;
    uint32_t      byte_len = 0;
    uint32_t      imm      = 0; /* network order */
    uint32_t      qp_num   = 0;
    uint32_t      src_qp   = 0;
    unsigned      flags    = 0;
    uint64_t      ts       = 0;
};

struct FakeChannel {
    ibv_comp_channel     ch;
    std::deque<ibv_cq *> events;
};

/// Page-aligned zeroed host memory (the mlx5 provider's buffers).
struct Pages {
    uint8_t *p = nullptr;
    explicit Pages(size_t bytes) :
        p(static_cast<uint8_t *>(std::aligned_alloc(4096, (bytes + 4095) & ~size_t(4095))))
    {
        std::memset(p, 0, (bytes + 4095) & ~size_t(4095));
    }
    ~Pages() { std::free(p); }
    Pages(const Pages &)            = delete;
    Pages &operator=(const Pages &) = delete;
};

/// An exported CQ: mlx5 CQEs of 64 bytes in host memory.
struct Mlx5Cq {
    Pages    buf;
    Pages    db{64};
    uint32_t cnt;
    uint32_t pi = 0; ///< CQEs written
    explicit Mlx5Cq(uint32_t n) : buf(size_t(n) * 64), cnt(n)
    {
        for (uint32_t i = 0; i < n; ++i) {
            buf.p[i * 64 + 63] = 0xf0; /* MLX5_CQE_INVALID, owner 0 */
        }
    }
};

/// An exported send queue: 64-byte WQE blocks, doorbell record, UAR page.
struct Mlx5Sq {
    Pages    buf;
    Pages    db{64};
    Pages    uar{4096};
    uint32_t cnt;
    uint16_t ci       = 0; ///< next WQE index to execute
    uint64_t executed = 0;
    uint32_t bad      = 0;
    explicit Mlx5Sq(uint32_t n) : buf(size_t(n) * 64), cnt(n) {}
    volatile uint64_t *reg() { return reinterpret_cast<volatile uint64_t *>(uar.p + 0x800); }
};

struct FakeCq {
    ibv_cq_ex               cq; /* first: ibv_cq_ex_to_cq casts */
    FakeHca                *hca;
    std::deque<Entry>       entries;
    Entry                   cur{};
    bool                    armed = false;
    uint32_t                cqn   = 0;
    std::unique_ptr<Mlx5Cq> mlx5; ///< set by mlx5dv_init_obj
};

struct FakeMr {
    ibv_mr mr;
    int    access;
};

struct FakeAh {
    ibv_ah      ah;
    ibv_ah_attr attr;
};

struct Sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

struct Recv {
    uint64_t         wr_id;
    std::vector<Sge> sges;
};

struct Send {
    uint64_t             wr_id;
    ibv_wr_opcode        opcode;
    unsigned             flags;
    std::vector<Sge>     sges;
    std::vector<uint8_t> inline_data;
    uint64_t             remote_addr;
    uint32_t             rkey;
    uint64_t             compare_add = 0;
    uint64_t             swap        = 0; ///< CMP_AND_SWP: the new value
    uint32_t             imm;
    ibv_ah_attr          ah;
    uint32_t             remote_qpn;
    uint32_t             qkey;
};

struct FakeQp {
    ibv_qp                  qp; /* first */
    FakeHca                *hca;
    ibv_qp_cap              cap;
    bool                    sig_all;
    uint32_t                qkey     = 0;
    uint32_t                dest_qpn = 0;
    ibv_ah_attr             ah{};
    std::deque<Recv>        rq;
    std::deque<Send>        sq;
    uint32_t                rate_kbps = 0;
    std::unique_ptr<Mlx5Sq> mlx5; ///< set by mlx5dv_init_obj
};

/* A verbs_context (abi_compat = extended), so that the inline calls of
 * verbs.h that go through verbs_get_ctx_op (ibv_create_cq_ex,
 * ibv_query_device_ex, ibv_query_port, ibv_query_rt_values_ex,
 * ibv_modify_qp_rate_limit) reach the fake exactly as they reach a provider. */
struct FakeContext {
    verbs_context vctx; /* first; vctx.context is the ibv_context */
    FakeHca      *hca;
};

struct FakeHca {
    HcaConfig                          config;
    ibv_device                         dev{};
    ibv_gid                            gid0{}, gid1{};
    uint16_t                           lid;
    std::mutex                         mrs_mu;
    std::map<uint32_t, FakeMr *>       mrs; /* by key */
    std::map<uint32_t, FakeQp *>       qps; /* by number */
    std::vector<std::vector<PostedWr>> posts;
    std::vector<FakeCq *>              cqs;
};

namespace {

FakeContext *fctx(ibv_context *c)
{
    return reinterpret_cast<FakeContext *>(reinterpret_cast<uint8_t *>(c) -
                                           offsetof(verbs_context, context));
}
FakeHca *hca_of(ibv_context *c)
{
    return fctx(c)->hca;
}
FakeQp *fq(ibv_qp *q)
{
    return reinterpret_cast<FakeQp *>(q);
}
FakeCq *fcq(ibv_cq *c)
{
    return reinterpret_cast<FakeCq *>(c);
}
FakeCq *fcq(ibv_cq_ex *c)
{
    return reinterpret_cast<FakeCq *>(c);
}

uint64_t ticks_now(const FakeHca &h, uint64_t plus_ns)
{
    return (now_ns() + plus_ns) * h.config.clock_khz / 1000000u;
}

uint8_t syndrome_of(ibv_wc_status st)
{
    switch (st) {
    case IBV_WC_LOC_LEN_ERR:
        return 0x01;
    case IBV_WC_LOC_QP_OP_ERR:
        return 0x02;
    case IBV_WC_LOC_PROT_ERR:
        return 0x04;
    case IBV_WC_WR_FLUSH_ERR:
        return 0x05;
    case IBV_WC_MW_BIND_ERR:
        return 0x06;
    case IBV_WC_BAD_RESP_ERR:
        return 0x10;
    case IBV_WC_LOC_ACCESS_ERR:
        return 0x11;
    case IBV_WC_REM_INV_REQ_ERR:
        return 0x12;
    case IBV_WC_REM_ACCESS_ERR:
        return 0x13;
    case IBV_WC_REM_OP_ERR:
        return 0x14;
    case IBV_WC_RETRY_EXC_ERR:
        return 0x15;
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return 0x16;
    case IBV_WC_REM_ABORT_ERR:
        return 0x22;
    default:
        return 0xff;
    }
}

void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned k = 0; k < bytes; ++k) {
        p[k] = uint8_t(v >> (8 * (bytes - 1 - k)));
    }
}

uint64_t get_be(const uint8_t *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned k = 0; k < bytes; ++k) {
        v = (v << 8) | p[k];
    }
    return v;
}

/// The NIC writes a 64-byte CQE (mlx5_cqe64 / mlx5_err_cqe layout):
/// wqe_counter at 60, syndrome at 55, op_own last, with the owner bit of
/// this pass over the ring.
void write_mlx5_cqe(FakeCq *c, const Entry &e, uint32_t qpn)
{
    Mlx5Cq  &m  = *c->mlx5;
    uint32_t ci = be32toh(__atomic_load_n(reinterpret_cast<uint32_t *>(m.db.p), __ATOMIC_ACQUIRE)) &
                  0xffffff;
    if (((m.pi - ci) & 0xffffff) >= m.cnt) {
        ++g_fabric->mlx5_cq_overruns; /* a real CQ would raise an error event */
        return;
    }
    uint8_t *cqe   = m.buf.p + size_t(m.pi & (m.cnt - 1)) * 64;
    uint8_t  owner = uint8_t((m.pi / m.cnt) & 1);
    std::memset(cqe, 0, 63);
    uint8_t opcode = e.status == IBV_WC_SUCCESS ? 0x0 /* MLX5_CQE_REQ */
                                                  :
                                                  0xd /* MLX5_CQE_REQ_ERR */;
    if (e.status != IBV_WC_SUCCESS) {
        cqe[54] = 0x42; /* vendor syndrome: any */
        cqe[55] = syndrome_of(e.status);
    }
    put_be(cqe + 44, e.byte_len, 4);
    put_be(cqe + 56, qpn, 4);
    put_be(cqe + 60, e.wr_id & 0xffff, 2);
    __atomic_store_n(cqe + 63, uint8_t((opcode << 4) | owner), __ATOMIC_RELEASE);
    ++m.pi;
}

void push(ibv_cq *cq, Entry e)
{
    FakeCq *c = fcq(cq);
    if (c->mlx5) {
        write_mlx5_cqe(c, e, e.qp_num);
        return;
    }
    e.ts = ticks_now(*c->hca, g_fabric->completion_delay_ns);
    c->entries.push_back(e);
    if (c->armed && c->cq.channel != nullptr) {
        c->armed = false;
        auto *ch = reinterpret_cast<FakeChannel *>(c->cq.channel);
        ch->events.push_back(cq);
        uint64_t one = 1;
        if (write(ch->ch.fd, &one, sizeof(one)) < 0) {
            /* the counter is far from overflow; nothing to do */
        }
    }
}

/* ---- memory checks ---- */

FakeMr *find_mr(FakeHca *h, uint32_t key, uint64_t addr, uint64_t len, int need)
{
    std::lock_guard lock(h->mrs_mu);
    auto            it = h->mrs.find(key);
    if (it == h->mrs.end()) {
        return nullptr;
    }
    FakeMr  *m     = it->second;
    uint64_t start = uintptr_t(m->mr.addr);
    if (addr < start || addr - start > m->mr.length || len > m->mr.length - (addr - start)) {
        return nullptr;
    }
    if ((m->access & need) != need) {
        return nullptr;
    }
    return m;
}

bool local_ok(FakeHca *h, const Send &s, int need)
{
    if (!s.inline_data.empty() || (s.flags & IBV_SEND_INLINE)) {
        return true;
    }
    for (const Sge &g : s.sges) {
        if (g.length != 0 && find_mr(h, g.lkey, g.addr, g.length, need) == nullptr) {
            return false;
        }
    }
    return true;
}

uint64_t total_of(const Send &s)
{
    if (s.flags & IBV_SEND_INLINE) {
        return s.inline_data.size();
    }
    uint64_t t = 0;
    for (const Sge &g : s.sges) {
        t += g.length;
    }
    return t;
}

/// Gathers the source bytes of a send.
std::vector<uint8_t> gather_sges(const Send &s)
{
    std::vector<uint8_t> out;
    for (const Sge &g : s.sges) {
        auto *p = reinterpret_cast<const uint8_t *>(uintptr_t(g.addr));
        out.insert(out.end(), p, p + g.length);
    }
    return out;
}

std::vector<uint8_t> gather(const Send &s)
{
    return (s.flags & IBV_SEND_INLINE) ? s.inline_data : gather_sges(s);
}

void flush_qp(FakeQp *q)
{
    q->qp.state = IBV_QPS_ERR;
    while (!q->sq.empty()) {
        Send s = q->sq.front();
        q->sq.pop_front();
        Entry e{s.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND};
        e.qp_num = q->qp.qp_num;
        push(q->qp.send_cq, e);
    }
    while (!q->rq.empty()) {
        Recv r = q->rq.front();
        q->rq.pop_front();
        Entry e{r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV};
        e.qp_num = q->qp.qp_num;
        push(q->qp.recv_cq, e);
    }
}

ibv_wc_opcode wc_opcode(ibv_wr_opcode op)
{
    switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
        return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        return IBV_WC_FETCH_ADD;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
        return IBV_WC_COMP_SWAP;
    default:
        return IBV_WC_SEND;
    }
}

/// Executes the head of q's send queue. Returns false if it must wait.
bool execute(FakeQp *q)
{
    Send         &s        = q->sq.front();
    FakeHca      *h        = q->hca;
    ibv_wc_status st       = IBV_WC_SUCCESS;
    bool          signaled = q->sig_all || (s.flags & IBV_SEND_SIGNALED);

    if (q->qp.qp_type == IBV_QPT_UD) {
        FakeHca *d    = g_fabric->find_hca(s.ah);
        bool     drop = g_fabric->drop_ud > 0;
        if (drop) {
            --g_fabric->drop_ud;
        }
        if (d != nullptr && !drop) {
            auto it = d->qps.find(s.remote_qpn);
            if (it != d->qps.end() && it->second->qp.qp_type == IBV_QPT_UD &&
                it->second->qkey == s.qkey && !it->second->rq.empty() &&
                it->second->qp.state >= IBV_QPS_RTR && it->second->qp.state <= IBV_QPS_RTS) {
                FakeQp              *t    = it->second;
                Recv                 r    = t->rq.front();
                std::vector<uint8_t> data = gather(s);
                if (r.sges.size() == 1 && r.sges[0].length >= data.size() + 40) {
                    t->rq.pop_front();
                    auto *dst = reinterpret_cast<uint8_t *>(uintptr_t(r.sges[0].addr));
                    std::memset(dst, 0, 40);
                    std::memcpy(dst + 40, data.data(), data.size());
                    Entry e{r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV};
                    e.byte_len = uint32_t(data.size() + 40);
                    e.qp_num   = t->qp.qp_num;
                    e.src_qp   = q->qp.qp_num;
                    e.flags    = IBV_WC_GRH;
                    push(t->qp.recv_cq, e);
                }
            }
        }
        if (signaled) {
            Entry e{s.wr_id, IBV_WC_SUCCESS, IBV_WC_SEND};
            e.qp_num = q->qp.qp_num;
            push(q->qp.send_cq, e);
        }
        q->sq.pop_front();
        return true;
    }

    /* RC */
    FakeHca *d = g_fabric->find_hca(q->ah);
    FakeQp  *t = nullptr;
    if (d != nullptr) {
        auto it = d->qps.find(q->dest_qpn);
        if (it != d->qps.end() && it->second->dest_qpn == q->qp.qp_num &&
            (it->second->qp.state == IBV_QPS_RTR || it->second->qp.state == IBV_QPS_RTS)) {
            t = it->second;
        }
    }
    uint64_t len = total_of(s);
    if (t == nullptr) {
        st = IBV_WC_RETRY_EXC_ERR; /* nobody answers */
    } else {
        switch (s.opcode) {
        case IBV_WR_RDMA_WRITE: {
            if (!local_ok(h, s, 0)) {
                st = IBV_WC_LOC_PROT_ERR;
            } else if (len != 0 &&
                       find_mr(d, s.rkey, s.remote_addr, len, IBV_ACCESS_REMOTE_WRITE) == nullptr) {
                st = IBV_WC_REM_ACCESS_ERR;
            } else if (len != 0) {
                std::vector<uint8_t> data = gather(s);
                std::memcpy(reinterpret_cast<void *>(uintptr_t(s.remote_addr)), data.data(),
                            data.size());
            }
            break;
        }
        case IBV_WR_RDMA_READ: {
            if (!local_ok(h, s, IBV_ACCESS_LOCAL_WRITE)) {
                st = IBV_WC_LOC_PROT_ERR;
            } else if (len != 0 &&
                       find_mr(d, s.rkey, s.remote_addr, len, IBV_ACCESS_REMOTE_READ) == nullptr) {
                st = IBV_WC_REM_ACCESS_ERR;
            } else {
                auto *src = reinterpret_cast<const uint8_t *>(uintptr_t(s.remote_addr));
                for (const Sge &g : s.sges) {
                    std::memcpy(reinterpret_cast<void *>(uintptr_t(g.addr)), src, g.length);
                    src += g.length;
                }
            }
            break;
        }
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
        case IBV_WR_ATOMIC_CMP_AND_SWP: {
            /* ConnectX executes atomics on a big-endian word and returns
             * the old value big-endian */
            if (s.sges.size() != 1 || s.sges[0].length != 8 ||
                !local_ok(h, s, IBV_ACCESS_LOCAL_WRITE)) {
                st = IBV_WC_LOC_PROT_ERR;
            } else if (s.remote_addr % 8 != 0) {
                st = IBV_WC_REM_INV_REQ_ERR;
            } else if (find_mr(d, s.rkey, s.remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC) == nullptr) {
                st = IBV_WC_REM_ACCESS_ERR;
            } else {
                auto    *word = reinterpret_cast<uint8_t *>(uintptr_t(s.remote_addr));
                uint64_t old  = get_be(word, 8);
                if (s.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
                    put_be(word, old + s.compare_add, 8);
                } else if (old == s.compare_add) {
                    put_be(word, s.swap, 8);
                }
                put_be(reinterpret_cast<uint8_t *>(uintptr_t(s.sges[0].addr)), old, 8);
            }
            len = 8;
            break;
        }
        case IBV_WR_SEND:
        case IBV_WR_SEND_WITH_IMM: {
            if (!local_ok(h, s, 0)) {
                st = IBV_WC_LOC_PROT_ERR;
                break;
            }
            if (t->rq.empty()) {
                return false; /* RNR: the sender retries */
            }
            Recv r = t->rq.front();
            t->rq.pop_front();
            std::vector<uint8_t> data = gather(s);
            uint64_t             room = 0;
            for (const Sge &g : r.sges) {
                room += g.length;
            }
            if (data.size() > room) {
                Entry e{r.wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV};
                e.qp_num = t->qp.qp_num;
                push(t->qp.recv_cq, e);
                flush_qp(t);
                st = IBV_WC_REM_INV_REQ_ERR;
                break;
            }
            size_t off = 0;
            for (const Sge &g : r.sges) {
                size_t n = std::min<size_t>(g.length, data.size() - off);
                if (n == 0) {
                    break;
                }
                if (find_mr(d, g.lkey, g.addr, n, IBV_ACCESS_LOCAL_WRITE) == nullptr) {
                    st = IBV_WC_REM_OP_ERR;
                    break;
                }
                std::memcpy(reinterpret_cast<void *>(uintptr_t(g.addr)), data.data() + off, n);
                off += n;
            }
            if (st != IBV_WC_SUCCESS) {
                break;
            }
            Entry e{r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV};
            e.byte_len = uint32_t(data.size());
            e.qp_num   = t->qp.qp_num;
            e.src_qp   = q->qp.qp_num;
            if (s.opcode == IBV_WR_SEND_WITH_IMM) {
                e.imm   = s.imm;
                e.flags = IBV_WC_WITH_IMM;
            }
            push(t->qp.recv_cq, e);
            break;
        }
        default:
            st = IBV_WC_REM_INV_REQ_ERR;
            break;
        }
    }
    Send done = s;
    q->sq.pop_front();
    if (st != IBV_WC_SUCCESS) {
        Entry e{done.wr_id, st, wc_opcode(done.opcode)};
        e.qp_num = q->qp.qp_num;
        push(q->qp.send_cq, e);
        flush_qp(q);
        return true;
    }
    if (signaled) {
        Entry e{done.wr_id, IBV_WC_SUCCESS, wc_opcode(done.opcode)};
        e.qp_num   = q->qp.qp_num;
        e.byte_len = uint32_t(len);
        push(q->qp.send_cq, e);
    }
    return true;
}

/* ---- data-path ops (reached through context->ops) ---- */

int op_post_send(ibv_qp *qp, ibv_send_wr *wr, ibv_send_wr **bad)
{
    FakeQp               *q = fq(qp);
    std::vector<PostedWr> record;
    for (; wr != nullptr; wr = wr->next) {
        if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR) {
            *bad = wr;
            return EINVAL;
        }
        if (wr->num_sge > int(q->cap.max_send_sge) || q->sq.size() >= q->cap.max_send_wr) {
            *bad = wr;
            return ENOMEM;
        }
        Send s{};
        s.wr_id  = wr->wr_id;
        s.opcode = wr->opcode;
        s.flags  = wr->send_flags;
        PostedWr p{wr->wr_id, wr->opcode, wr->send_flags, {}, 0};
        uint64_t inl = 0;
        for (int i = 0; i < wr->num_sge; ++i) {
            const ibv_sge &g = wr->sg_list[i];
            s.sges.push_back({g.addr, g.length, g.lkey});
            p.sge_lengths.push_back(g.length);
            inl += g.length;
        }
        if (wr->send_flags & IBV_SEND_INLINE) {
            if (inl > q->cap.max_inline_data) {
                *bad = wr;
                return EINVAL;
            }
            s.inline_data = gather_sges(s); /* inline: copied at post time */
            p.inline_data = s.inline_data;
        }
        if (q->qp.qp_type == IBV_QPT_UD) {
            s.ah         = reinterpret_cast<FakeAh *>(wr->wr.ud.ah)->attr;
            s.remote_qpn = wr->wr.ud.remote_qpn;
            s.qkey       = wr->wr.ud.remote_qkey;
        } else if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
                   wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
            s.remote_addr = wr->wr.atomic.remote_addr;
            s.rkey        = wr->wr.atomic.rkey;
            s.compare_add = wr->wr.atomic.compare_add;
            s.swap        = wr->wr.atomic.swap;
            p.remote_addr = s.remote_addr;
            p.rkey        = s.rkey;
            p.compare_add = s.compare_add;
            p.swap        = s.swap;
        } else {
            s.remote_addr = wr->wr.rdma.remote_addr;
            s.rkey        = wr->wr.rdma.rkey;
            s.imm         = wr->imm_data;
            p.remote_addr = s.remote_addr;
            p.rkey        = s.rkey;
        }
        if (q->qp.state == IBV_QPS_ERR) {
            Entry e{s.wr_id, IBV_WC_WR_FLUSH_ERR, wc_opcode(s.opcode)};
            e.qp_num = q->qp.qp_num;
            push(q->qp.send_cq, e);
        } else {
            q->sq.push_back(std::move(s));
        }
        record.push_back(std::move(p));
    }
    if (q->qp.qp_type == IBV_QPT_RC) {
        q->hca->posts.push_back(std::move(record));
    }
    g_fabric->run();
    return 0;
}

int op_post_recv(ibv_qp *qp, ibv_recv_wr *wr, ibv_recv_wr **bad)
{
    FakeQp *q = fq(qp);
    for (; wr != nullptr; wr = wr->next) {
        if (q->qp.state == IBV_QPS_RESET || q->rq.size() >= q->cap.max_recv_wr) {
            *bad = wr;
            return ENOMEM;
        }
        Recv r{wr->wr_id, {}};
        for (int i = 0; i < wr->num_sge; ++i) {
            r.sges.push_back({wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey});
        }
        q->rq.push_back(std::move(r));
    }
    g_fabric->run();
    return 0;
}

int op_req_notify(ibv_cq *cq, int)
{
    fcq(cq)->armed = true;
    return 0;
}

int op_poll_cq(ibv_cq *cq, int num, ibv_wc *wc)
{
    FakeCq *c = fcq(cq);
    int     n = 0;
    while (n < num && !c->entries.empty()) {
        Entry e = c->entries.front();
        c->entries.pop_front();
        wc[n]          = {};
        wc[n].wr_id    = e.wr_id;
        wc[n].status   = e.status;
        wc[n].opcode   = e.opcode;
        wc[n].byte_len = e.byte_len;
        wc[n].imm_data = e.imm;
        wc[n].qp_num   = e.qp_num;
        wc[n].src_qp   = e.src_qp;
        wc[n].wc_flags = e.flags;
        ++n;
    }
    return n;
}

int cq_next(ibv_cq_ex *cq)
{
    FakeCq *c = fcq(cq);
    if (c->entries.empty()) {
        return ENOENT;
    }
    c->cur = c->entries.front();
    c->entries.pop_front();
    cq->wr_id  = c->cur.wr_id;
    cq->status = c->cur.status;
    return 0;
}
int cq_start(ibv_cq_ex *cq, ibv_poll_cq_attr *)
{
    return cq_next(cq);
}
void          cq_end(ibv_cq_ex *) {}
ibv_wc_opcode cq_opcode(ibv_cq_ex *cq)
{
    return fcq(cq)->cur.opcode;
}
uint32_t cq_vendor_err(ibv_cq_ex *)
{
    return 0;
}
uint32_t cq_byte_len(ibv_cq_ex *cq)
{
    return fcq(cq)->cur.byte_len;
}
__be32 cq_imm(ibv_cq_ex *cq)
{
    return fcq(cq)->cur.imm;
}
uint32_t cq_qp_num(ibv_cq_ex *cq)
{
    return fcq(cq)->cur.qp_num;
}
uint32_t cq_src_qp(ibv_cq_ex *cq)
{
    return fcq(cq)->cur.src_qp;
}
unsigned cq_flags(ibv_cq_ex *cq)
{
    return fcq(cq)->cur.flags;
}
uint64_t cq_ts(ibv_cq_ex *cq)
{
    return fcq(cq)->cur.ts;
}

/* ---- control path (the Provider table) ---- */

ibv_device **get_device_list(int *n)
{
    *n = int(g_fabric->list.size()) - 1;
    return g_fabric->list.data();
}
void free_device_list(ibv_device **) {}

int query_device_ex(ibv_context *c, const ibv_query_device_ex_input *, ibv_device_attr_ex *a);
int query_port(ibv_context *c, uint8_t port, ibv_port_attr *a);
int query_rt_values_ex(ibv_context *c, ibv_values_ex *v);
ibv_cq_ex *create_cq_ex(ibv_context *c, ibv_cq_init_attr_ex *attr);
int        modify_qp_rate_limit(ibv_qp *qp, ibv_qp_rate_limit_attr *a);

ibv_context *open_device(ibv_device *dev)
{
    for (auto &h : g_fabric->hcas) {
        if (&h->dev == dev) {
            auto *c                = new FakeContext{};
            c->hca                 = h.get();
            verbs_context &v       = c->vctx;
            v.sz                   = sizeof(verbs_context);
            v.create_cq_ex         = create_cq_ex;
            v.query_rt_values      = query_rt_values_ex;
            v.modify_qp_rate_limit = modify_qp_rate_limit;
            v.query_device_ex      = [](ibv_context *ctx, const ibv_query_device_ex_input *in,
                                   ibv_device_attr_ex *attr,
                                   size_t) { return query_device_ex(ctx, in, attr); };
            v.query_port = [](ibv_context *ctx, uint8_t port, ibv_port_attr *attr, size_t) {
                return query_port(ctx, port, attr);
            };
            ibv_context &ctx      = v.context;
            ctx.abi_compat        = __VERBS_ABI_IS_EXTENDED;
            ctx.device            = dev;
            ctx.ops.post_send     = op_post_send;
            ctx.ops.post_recv     = op_post_recv;
            ctx.ops.poll_cq       = op_poll_cq;
            ctx.ops.req_notify_cq = op_req_notify;
            ctx.num_comp_vectors  = 1;
            ctx.cmd_fd = ctx.async_fd = -1;
            return &ctx;
        }
    }
    errno = ENODEV;
    return nullptr;
}
int close_device(ibv_context *c)
{
    delete fctx(c);
    return 0;
}

int query_device_ex(ibv_context *c, const ibv_query_device_ex_input *, ibv_device_attr_ex *a)
{
    const HcaConfig &cfg             = hca_of(c)->config;
    *a                               = {};
    a->orig_attr.phys_port_cnt       = 1;
    a->orig_attr.max_sge             = cfg.max_sge;
    a->orig_attr.max_qp_wr           = 32768;
    a->orig_attr.max_qp_rd_atom      = 16;
    a->orig_attr.max_qp_init_rd_atom = 16;
    a->orig_attr.max_cqe             = 4194303;
    a->orig_attr.atomic_cap          = cfg.atomics ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
    if (cfg.timestamps) {
        a->completion_timestamp_mask = (uint64_t(1) << 63) - 1;
        a->hca_core_clock            = cfg.clock_khz;
    }
    if (cfg.hw_pacing) {
        a->packet_pacing_caps.qp_rate_limit_min = 1000;
        a->packet_pacing_caps.qp_rate_limit_max = 100000000;
        a->packet_pacing_caps.supported_qpts    = 1u << IBV_QPT_RC;
    }
    return 0;
}

int query_port(ibv_context *c, uint8_t port, ibv_port_attr *a)
{
    FakeHca *h = hca_of(c);
    if (port != 1) {
        return EINVAL;
    }
    *a              = {};
    a->state        = h->config.port_active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
    a->max_mtu      = IBV_MTU_4096;
    a->active_mtu   = h->config.roce ? IBV_MTU_1024 : IBV_MTU_4096;
    a->lid          = h->config.roce ? 0 : h->lid;
    a->link_layer   = h->config.roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    a->active_speed = 64; /* 50 Gb/s per lane (HDR) */
    a->active_width = 2;  /* 4x */
    a->gid_tbl_len  = 2;
    return 0;
}

int query_gid(ibv_context *c, uint8_t, int index, ibv_gid *gid)
{
    FakeHca *h = hca_of(c);
    if (index == 0) {
        *gid = h->gid0;
    } else if (index == 1 && h->config.roce) {
        *gid = h->gid1;
    } else {
        std::memset(gid, 0, sizeof(*gid));
    }
    return 0;
}

int query_rt_values_ex(ibv_context *c, ibv_values_ex *v)
{
    v->raw_clock.tv_sec  = 0;
    v->raw_clock.tv_nsec = long(ticks_now(*hca_of(c), 0));
    return 0;
}

ibv_pd *alloc_pd(ibv_context *c)
{
    auto *pd    = new ibv_pd{};
    pd->context = c;
    return pd;
}
int dealloc_pd(ibv_pd *pd)
{
    delete pd;
    return 0;
}

/// Pinning stand-in: reads one byte of every page, as get_user_pages
/// faults them in. A registration covers whole pages, part of which lie
/// outside the caller's heap object: mapped, but not the object's bytes.
__attribute__((no_sanitize("address", "thread"))) void touch_pages(const void *addr, size_t length)
{
    volatile const uint8_t *p = static_cast<const uint8_t *>(addr);
    for (size_t off = 0; off < length; off += 4096) {
        (void)p[off];
    }
}

ibv_mr *reg_mr(ibv_pd *pd, void *addr, size_t length, int access)
{
    FakeHca *h = hca_of(pd->context);
    ++g_fabric->reg_mr_calls;
    touch_pages(addr, length);
    auto *m       = new FakeMr{};
    m->mr.context = pd->context;
    m->mr.pd      = pd;
    m->mr.addr    = addr;
    m->mr.length  = length;
    m->mr.lkey = m->mr.rkey = g_fabric->next_key();
    m->access               = access;
    std::lock_guard lock(h->mrs_mu);
    h->mrs[m->mr.rkey] = m;
    return &m->mr;
}
int dereg_mr(ibv_mr *mr)
{
    FakeHca *h = hca_of(mr->context);
    ++g_fabric->dereg_mr_calls;
    std::lock_guard lock(h->mrs_mu);
    h->mrs.erase(mr->rkey);
    delete reinterpret_cast<FakeMr *>(mr);
    return 0;
}

ibv_comp_channel *create_comp_channel(ibv_context *c)
{
    auto *ch       = new FakeChannel{};
    ch->ch.context = c;
    ch->ch.fd      = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return &ch->ch;
}
int destroy_comp_channel(ibv_comp_channel *c)
{
    close(c->fd);
    delete reinterpret_cast<FakeChannel *>(c);
    return 0;
}
int get_cq_event(ibv_comp_channel *c, ibv_cq **cq, void **ctx)
{
    auto    *ch = reinterpret_cast<FakeChannel *>(c);
    uint64_t v;
    if (ch->events.empty()) {
        errno = EAGAIN;
        return -1;
    }
    if (read(c->fd, &v, sizeof(v)) < 0) {
        /* drained by an earlier read: the queue is the truth */
    }
    *cq  = ch->events.front();
    *ctx = (*cq)->cq_context;
    ch->events.pop_front();
    return 0;
}
void ack_cq_events(ibv_cq *, unsigned) {}

ibv_cq_ex *create_cq_ex(ibv_context *c, ibv_cq_init_attr_ex *attr)
{
    FakeHca *h = hca_of(c);
    if ((attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) && !h->config.timestamps) {
        errno = EOPNOTSUPP;
        return nullptr;
    }
    auto *f               = new FakeCq{};
    f->hca                = h;
    ibv_cq_ex &cq         = f->cq;
    cq.context            = c;
    cq.channel            = attr->channel;
    cq.cqe                = int(attr->cqe);
    cq.start_poll         = cq_start;
    cq.next_poll          = cq_next;
    cq.end_poll           = cq_end;
    cq.read_opcode        = cq_opcode;
    cq.read_vendor_err    = cq_vendor_err;
    cq.read_byte_len      = cq_byte_len;
    cq.read_imm_data      = cq_imm;
    cq.read_qp_num        = cq_qp_num;
    cq.read_src_qp        = cq_src_qp;
    cq.read_wc_flags      = cq_flags;
    cq.read_completion_ts = cq_ts;
    static uint32_t cqn   = 0x80;
    f->cqn                = ++cqn;
    h->cqs.push_back(f);
    return &cq;
}
int destroy_cq(ibv_cq *cq)
{
    FakeCq *f = fcq(cq);
    auto   &v = f->hca->cqs;
    v.erase(std::find(v.begin(), v.end(), f));
    delete f;
    return 0;
}

ibv_qp *create_qp(ibv_pd *pd, ibv_qp_init_attr *attr)
{
    FakeHca *h = hca_of(pd->context);
    if (attr->cap.max_inline_data > h->config.max_inline ||
        attr->cap.max_send_sge > uint32_t(h->config.max_sge)) {
        errno = EINVAL;
        return nullptr;
    }
    auto *q              = new FakeQp{};
    q->hca               = h;
    q->qp.context        = pd->context;
    q->qp.pd             = pd;
    q->qp.send_cq        = attr->send_cq;
    q->qp.recv_cq        = attr->recv_cq;
    q->qp.qp_num         = g_fabric->next_qpn();
    q->qp.state          = IBV_QPS_RESET;
    q->qp.qp_type        = attr->qp_type;
    q->cap               = attr->cap;
    q->sig_all           = attr->sq_sig_all != 0;
    h->qps[q->qp.qp_num] = q;
    return &q->qp;
}

int modify_qp(ibv_qp *qp, ibv_qp_attr *a, int mask)
{
    FakeQp *q = fq(qp);
    if (mask & IBV_QP_QKEY) {
        q->qkey = a->qkey;
    }
    if (mask & IBV_QP_DEST_QPN) {
        q->dest_qpn = a->dest_qp_num;
    }
    if (mask & IBV_QP_AV) {
        q->ah = a->ah_attr;
    }
    if (mask & IBV_QP_STATE) {
        if (a->qp_state == IBV_QPS_RTR && q->qp.qp_type == IBV_QPT_RC &&
            !(mask & IBV_QP_DEST_QPN && mask & IBV_QP_AV)) {
            return EINVAL;
        }
        q->qp.state = a->qp_state;
    }
    g_fabric->run();
    return 0;
}

int destroy_qp(ibv_qp *qp)
{
    FakeQp *q = fq(qp);
    q->hca->qps.erase(q->qp.qp_num);
    /* like mlx5's CQ clean: no completions of a destroyed QP remain */
    for (FakeCq *c : q->hca->cqs) {
        auto &e = c->entries;
        e.erase(std::remove_if(e.begin(), e.end(),
                               [&](const Entry &x) { return x.qp_num == q->qp.qp_num; }),
                e.end());
    }
    delete q;
    return 0;
}

int modify_qp_rate_limit(ibv_qp *qp, ibv_qp_rate_limit_attr *a)
{
    FakeQp *q = fq(qp);
    if (!q->hca->config.hw_pacing) {
        return EOPNOTSUPP;
    }
    ++g_fabric->rate_limit_calls;
    g_fabric->last_rate_kbps = a->rate_limit;
    q->rate_kbps             = a->rate_limit;
    return 0;
}

ibv_ah *create_ah(ibv_pd *pd, ibv_ah_attr *attr)
{
    auto *ah       = new FakeAh{};
    ah->ah.context = pd->context;
    ah->ah.pd      = pd;
    ah->attr       = *attr;
    return &ah->ah;
}
int destroy_ah(ibv_ah *ah)
{
    delete reinterpret_cast<FakeAh *>(ah);
    return 0;
}

#ifdef DOORBELL_VERBS_MLX5DV
bool mlx5_is_supported(ibv_device *dev)
{
    for (auto &h : g_fabric->hcas) {
        if (&h->dev == dev) {
            return h->config.mlx5;
        }
    }
    return false;
}

uint32_t pow2_at_least(uint32_t v)
{
    uint32_t p = 1;
    while (p < v) {
        p <<= 1;
    }
    return p;
}

/// What mlx5dv_init_obj gives for a QP and its CQ: the provider's buffers.
int mlx5_init_obj(mlx5dv_obj *obj, uint64_t type)
{
    if (type & MLX5DV_OBJ_QP) {
        FakeQp *q = fq(obj->qp.in);
        if (!q->hca->config.mlx5 || q->qp.qp_type != IBV_QPT_RC) {
            return EOPNOTSUPP;
        }
        if (!q->mlx5) {
            q->mlx5 = std::make_unique<Mlx5Sq>(pow2_at_least(q->cap.max_send_wr));
        }
        mlx5dv_qp &o = *obj->qp.out;
        o            = {};
        o.dbrec      = reinterpret_cast<__be32 *>(q->mlx5->db.p);
        o.sq.buf     = q->mlx5->buf.p;
        o.sq.wqe_cnt = q->mlx5->cnt;
        o.sq.stride  = 64;
        o.bf.reg     = q->mlx5->uar.p + 0x800;
        o.bf.size    = 256;
    }
    if (type & MLX5DV_OBJ_CQ) {
        FakeCq *c = fcq(obj->cq.in);
        if (!c->hca->config.mlx5) {
            return EOPNOTSUPP;
        }
        if (!c->mlx5) {
            c->mlx5 = std::make_unique<Mlx5Cq>(pow2_at_least(uint32_t(c->cq.cqe)));
        }
        mlx5dv_cq &o = *obj->cq.out;
        o            = {};
        o.buf        = c->mlx5->buf.p;
        o.dbrec      = reinterpret_cast<__be32 *>(c->mlx5->db.p);
        o.cqe_cnt    = c->mlx5->cnt;
        o.cqe_size   = 64;
        o.cqn        = c->cqn;
    }
    return 0;
}
#endif

/// The fake NIC on one exported send queue: every WQE between its consumer
/// index and the doorbell record becomes a Send (wr_id = the WQE index,
/// which the CQE reports as wqe_counter).
unsigned mlx5_consume(FakeQp *q)
{
    Mlx5Sq &m = *q->mlx5;
    /* the record is written by another agent (a thread in the tests) */
    uint32_t rec = __atomic_load_n(reinterpret_cast<uint32_t *>(m.db.p + 4), __ATOMIC_ACQUIRE);
    uint16_t pi  = uint16_t(be32toh(rec));
    unsigned n   = 0;
    while (m.ci != pi) {
        const uint8_t *w      = m.buf.p + size_t(m.ci & (m.cnt - 1)) * 64;
        uint32_t       op_idx = uint32_t(get_be(w, 4));
        uint32_t       qpn_ds = uint32_t(get_be(w + 4, 4));
        uint8_t        opcode = uint8_t(op_idx);
        uint8_t        ds     = uint8_t(qpn_ds & 0x3f);
        Send           s{};
        s.wr_id = m.ci;
        s.flags = (w[11] & 0x08) ? IBV_SEND_SIGNALED : 0;
        bool ok = (op_idx >> 8) == m.ci && (qpn_ds >> 8) == q->qp.qp_num && ds >= 1 && ds <= 4;
        if (ok) {
            switch (opcode) {
            case 0x00: /* NOP: a zero-length write */
                s.opcode = IBV_WR_RDMA_WRITE;
                break;
            case 0x08: /* RDMA WRITE */
            case 0x10: /* RDMA READ */
                s.opcode      = opcode == 0x08 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
                s.remote_addr = get_be(w + 16, 8);
                s.rkey        = uint32_t(get_be(w + 24, 4));
                if (get_be(w + 32, 4) & 0x80000000u) {
                    uint32_t len = uint32_t(get_be(w + 32, 4)) & 0x3ff;
                    ok = opcode == 0x08 && 36 + len <= 64 && ds == 2 + (4 + len + 15) / 16;
                    if (ok) {
                        s.flags |= IBV_SEND_INLINE;
                        s.inline_data.assign(w + 36, w + 36 + len);
                    }
                } else {
                    ok = ds == 3;
                    s.sges.push_back({get_be(w + 40, 8), uint32_t(get_be(w + 32, 4)),
                                      uint32_t(get_be(w + 36, 4))});
                }
                break;
            case 0x12: /* ATOMIC fetch-add */
                s.opcode      = IBV_WR_ATOMIC_FETCH_AND_ADD;
                s.remote_addr = get_be(w + 16, 8);
                s.rkey        = uint32_t(get_be(w + 24, 4));
                s.compare_add = get_be(w + 32, 8);
                s.sges.push_back(
                    {get_be(w + 56, 8), uint32_t(get_be(w + 48, 4)), uint32_t(get_be(w + 52, 4))});
                ok = ds == 4;
                break;
            default:
                ok = false;
                break;
            }
        }
        ++m.ci;
        ++n;
        if (!ok) {
            ++m.bad;
            Entry e{s.wr_id, IBV_WC_LOC_QP_OP_ERR, IBV_WC_SEND};
            e.qp_num = q->qp.qp_num;
            push(q->qp.send_cq, e);
            flush_qp(q);
            continue;
        }
        if (q->qp.state == IBV_QPS_ERR) {
            Entry e{s.wr_id, IBV_WC_WR_FLUSH_ERR, wc_opcode(s.opcode)};
            e.qp_num = q->qp.qp_num;
            push(q->qp.send_cq, e);
            continue;
        }
        q->sq.push_back(std::move(s));
        ++m.executed;
    }
    return n;
}

} // namespace

unsigned Fabric::mlx5_process()
{
    unsigned n = 0;
    for (auto &h : hcas) {
        for (auto &[num, q] : h->qps) {
            if (q->mlx5) {
                n += mlx5_consume(q);
            }
        }
    }
    run();
    return n;
}

Fabric::Mlx5QpView Fabric::mlx5_qp(uint32_t qpn) const
{
    Mlx5QpView v;
    for (auto &h : hcas) {
        auto it = h->qps.find(qpn);
        if (it != h->qps.end() && it->second->mlx5) {
            Mlx5Sq &m       = *it->second->mlx5;
            v.wqes_executed = m.executed;
            v.last_uar      = __atomic_load_n(m.reg(), __ATOMIC_ACQUIRE);
            v.consumer      = m.ci;
            v.bad_wqes      = m.bad;
        }
    }
    return v;
}

Fabric::Fabric()
{
    provider = Provider{
        get_device_list,
        free_device_list,
        open_device,
        close_device,
        query_device_ex,
        query_port,
        query_gid,
        query_rt_values_ex,
        alloc_pd,
        dealloc_pd,
        reg_mr,
        dereg_mr,
        create_comp_channel,
        destroy_comp_channel,
        get_cq_event,
        ack_cq_events,
        create_cq_ex,
        destroy_cq,
        create_qp,
        modify_qp,
        destroy_qp,
        modify_qp_rate_limit,
        create_ah,
        destroy_ah,
        "/nonexistent",
#ifdef DOORBELL_VERBS_MLX5DV
        mlx5_is_supported,
        mlx5_init_obj,
#else
        nullptr,
        nullptr,
#endif
    };
    list.push_back(nullptr);
    g_fabric = this;
}

Fabric::~Fabric()
{
    set_provider(nullptr);
    g_fabric = nullptr;
}

Fabric *Fabric::current()
{
    return g_fabric;
}

FakeHca &Fabric::add_hca(const HcaConfig &config)
{
    auto h      = std::make_unique<FakeHca>();
    h->config   = config;
    unsigned id = unsigned(hcas.size()) + 1;
    h->lid      = config.lid ? config.lid : uint16_t(id);
    snprintf(h->dev.name, sizeof(h->dev.name), "%s", config.name.c_str());
    snprintf(h->dev.ibdev_path, sizeof(h->dev.ibdev_path), "/nonexistent/%s", config.name.c_str());
    h->dev.node_type      = IBV_NODE_CA;
    h->dev.transport_type = IBV_TRANSPORT_IB;
    h->gid0.raw[0]        = 0xfe;
    h->gid0.raw[1]        = 0x80;
    h->gid0.raw[15]       = uint8_t(id);
    h->gid1.raw[10]       = 0xff;
    h->gid1.raw[11]       = 0xff;
    h->gid1.raw[12]       = 10;
    h->gid1.raw[15]       = uint8_t(id);
    list.insert(list.end() - 1, &h->dev);
    hcas.push_back(std::move(h));
    return *hcas.back();
}

void Fabric::install()
{
    provider.sysfs_root = sysfs_root.empty() ? "/nonexistent" : sysfs_root;
    set_provider(&provider);
}

const std::vector<std::vector<PostedWr>> &Fabric::posts(const std::string &hca) const
{
    for (auto &h : hcas) {
        if (h->config.name == hca) {
            return h->posts;
        }
    }
    static const std::vector<std::vector<PostedWr>> none;
    return none;
}

void Fabric::clear_posts()
{
    for (auto &h : hcas) {
        h->posts.clear();
    }
}

FakeHca *Fabric::find_hca(const ibv_ah_attr &ah)
{
    for (auto &h : hcas) {
        if (ah.is_global) {
            if (std::memcmp(ah.grh.dgid.raw, h->gid0.raw, 16) == 0 ||
                (h->config.roce && std::memcmp(ah.grh.dgid.raw, h->gid1.raw, 16) == 0)) {
                return h.get();
            }
        } else if (!h->config.roce && ah.dlid == h->lid) {
            return h.get();
        }
    }
    return nullptr;
}

void Fabric::run()
{
    if (running_) {
        return; /* a post from inside run(): the outer loop picks it up */
    }
    running_      = true;
    bool progress = true;
    while (progress) {
        progress = false;
        for (auto &h : hcas) {
            for (auto &[num, q] : h->qps) {
                while (!q->sq.empty() && q->qp.state == IBV_QPS_RTS) {
                    if (!execute(q)) {
                        break;
                    }
                    progress = true;
                }
            }
        }
    }
    running_ = false;
}

uint32_t Fabric::next_qpn()
{
    return qpn_++ & 0xffffff;
}

uint32_t Fabric::next_key()
{
    return key_.fetch_add(0x101) + 0x101;
}

} // namespace doorbell::verbs::fake
