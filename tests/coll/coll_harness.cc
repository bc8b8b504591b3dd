#include "coll_harness.h"

#include "reduce.h"
#include "schedules.h"

#include <algorithm>
#include <cstddef>
#include <complex>
#include <cstring>
#include <map>
#include <random>
#include <thread>

namespace doorbell::coll::testing {
namespace {

template <class V, class I>
struct Pair {
    V v;
    I k;
};

template <class T>
void put_elem(Bytes &b, size_t i, T v)
{
    std::memcpy(b.data() + i * sizeof(T), &v, sizeof(T));
}

bool is_float(doorbell_coll_dtype_t t)
{
    return t == DOORBELL_COLL_DT_FLOAT || t == DOORBELL_COLL_DT_DOUBLE ||
           t == DOORBELL_COLL_DT_LONG_DOUBLE;
}

// A float value for op: exact mode keeps every order exact (small integers
// for SUM, powers of two for PROD); random mode gives full mantissas.
double float_value(std::mt19937_64 &rng, doorbell_coll_op_t op, bool exact)
{
    if (!exact) {
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        std::uniform_int_distribution<int>     ex(-8, 8);
        return std::ldexp(u(rng), ex(rng));
    }
    if (op == DOORBELL_COLL_OP_PROD) {
        static const double v[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
        return v[rng() % 6];
    }
    return static_cast<double>(static_cast<int>(rng() % 17) - 8);
}

template <class T>
void fill_float(Bytes &b, size_t n, std::mt19937_64 &rng, const Case &c)
{
    for (size_t i = 0; i < n; i++)
        put_elem<T>(b, i, static_cast<T>(float_value(rng, c.op, c.exact)));
}

template <class T>
void fill_complex(Bytes &b, size_t n, std::mt19937_64 &rng, const Case &c)
{
    for (size_t i = 0; i < n; i++) {
        T v[2];
        if (c.op == DOORBELL_COLL_OP_PROD && c.exact) {
            static const int re[] = {1, -1, 0, 0, 1, 1}, im[] = {0, 0, 1, -1, 1, -1};
            int              k = static_cast<int>(rng() % 6);
            v[0]               = static_cast<T>(re[k]);
            v[1]               = static_cast<T>(im[k]);
        } else {
            v[0] = static_cast<T>(float_value(rng, DOORBELL_COLL_OP_SUM, c.exact));
            v[1] = static_cast<T>(float_value(rng, DOORBELL_COLL_OP_SUM, c.exact));
        }
        std::memcpy(b.data() + i * sizeof(v), v, sizeof(v));
    }
}

template <class V, class I>
void fill_pair(Bytes &b, size_t n, std::mt19937_64 &rng)
{
    for (size_t i = 0; i < n; i++) {
        Pair<V, I> p;
        std::memset(&p, 0, sizeof(p));
        p.v = static_cast<V>(rng() % 4); // many ties: the index rule matters
        p.k = static_cast<I>(rng() % 100);
        std::memcpy(b.data() + i * sizeof(p), &p, sizeof(p));
    }
}

template <class T>
void fill_int(Bytes &b, size_t n, std::mt19937_64 &rng, const Case &c)
{
    bool logic = c.op == DOORBELL_COLL_OP_LAND || c.op == DOORBELL_COLL_OP_LOR ||
                 c.op == DOORBELL_COLL_OP_LXOR;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        T v = logic ? static_cast<T>(r % 8 == 0 ? 0 : (r % 3) - 1 + (r % 5)) : static_cast<T>(r);
        put_elem<T>(b, i, v);
    }
}

// Fold b into a (a = a op b) over [start, start + count) elements.
void fold(const Case &c, Bytes &a, const Bytes &b, size_t start, size_t count)
{
    size_t e = dtype_size(c.dtype);
    reduce(c.dtype, c.op, a.data() + start * e, b.data() + start * e, a.data() + start * e, count);
}

Bytes folded(const Case &c, const Bytes &a, const Bytes &b)
{
    Bytes out = a;
    fold(c, out, b, 0, c.count);
    return out;
}

// The tree of recursive doubling and of Rabenseifner's halving (masks 1, 2,
// ...) over values of one group.
Bytes tree(const Case &c, const std::vector<Bytes> &x)
{
    int n = static_cast<int>(x.size());
    if (n == 1)
        return x[0];
    int                p2 = pow2_floor(n), rem = n - p2, steps = log2_floor(n);
    std::vector<Bytes> v(p2);
    for (int i = 0; i < p2; i++)
        v[i] = i < rem ? folded(c, x[2 * i], x[2 * i + 1]) : x[i + rem];
    for (int k = 0; k < steps; k++) {
        int                mask = 1 << k;
        std::vector<Bytes> next(p2);
        for (int i = 0; i < p2; i++) {
            int j   = i ^ mask;
            next[i] = i < j ? folded(c, v[i], v[j]) : folded(c, v[j], v[i]);
        }
        v.swap(next);
    }
    return v[0];
}

Bytes ring_order(const Case &c, const std::vector<Bytes> &x)
{
    size_t n = x.size();
    Bytes  out(x[0].size());
    size_t e = dtype_size(c.dtype), q = c.count / n, rest = c.count % n;
    for (size_t j = 0; j < n; j++) {
        size_t start = j * q + std::min(j, rest), cnt = q + (j < rest ? 1 : 0);
        Bytes  acc = x[j];
        for (size_t t = 1; t < n; t++)
            fold(c, acc, x[(j + t) % n], start, cnt);
        std::memcpy(out.data() + start * e, acc.data() + start * e, cnt * e);
    }
    return out;
}

} // namespace

Bytes make_input(const Case &c, int rank)
{
    size_t          n = c.count, e = dtype_size(c.dtype);
    Bytes           b(n * e);
    std::mt19937_64 rng(c.seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + 17u);
    switch (c.dtype) {
    case DOORBELL_COLL_DT_INT8:
        fill_int<int8_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_UINT8:
        fill_int<uint8_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_INT16:
        fill_int<int16_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_UINT16:
        fill_int<uint16_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_INT32:
        fill_int<int32_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_UINT32:
        fill_int<uint32_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_INT64:
        fill_int<int64_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_UINT64:
        fill_int<uint64_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_BYTE:
        fill_int<uint8_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_LOGICAL:
        fill_int<int32_t>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_BOOL:
        for (size_t i = 0; i < n; i++)
            b[i] = rng() % 3 == 0 ? 0 : 1;
        break;
    case DOORBELL_COLL_DT_FLOAT:
        fill_float<float>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_DOUBLE:
        fill_float<double>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_LONG_DOUBLE:
        fill_float<long double>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_FLOAT_COMPLEX:
        fill_complex<float>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_DOUBLE_COMPLEX:
        fill_complex<double>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_LONG_DOUBLE_COMPLEX:
        fill_complex<long double>(b, n, rng, c);
        break;
    case DOORBELL_COLL_DT_FLOAT_INT:
        fill_pair<float, int>(b, n, rng);
        break;
    case DOORBELL_COLL_DT_DOUBLE_INT:
        fill_pair<double, int>(b, n, rng);
        break;
    case DOORBELL_COLL_DT_LONG_INT:
        fill_pair<long, int>(b, n, rng);
        break;
    case DOORBELL_COLL_DT_2INT:
        fill_pair<int, int>(b, n, rng);
        break;
    case DOORBELL_COLL_DT_SHORT_INT:
        fill_pair<short, int>(b, n, rng);
        break;
    case DOORBELL_COLL_DT_LONG_DOUBLE_INT:
        fill_pair<long double, int>(b, n, rng);
        break;
    case DOORBELL_COLL_DT_2FLOAT:
        fill_pair<float, float>(b, n, rng);
        break;
    case DOORBELL_COLL_DT_2DOUBLE:
        fill_pair<double, double>(b, n, rng);
        break;
    default:
        break;
    }
    (void)is_float;
    return b;
}

std::vector<std::pair<size_t, size_t>> significant(doorbell_coll_dtype_t t)
{
    using LdI       = Pair<long double, int>;
    using DI        = Pair<double, int>;
    using LI        = Pair<long, int>;
    using SI        = Pair<short, int>;
    const size_t ld = 10; // x87 extended precision: 10 of 16 bytes
    switch (t) {
    case DOORBELL_COLL_DT_LONG_DOUBLE:
        return {{0, ld}};
    case DOORBELL_COLL_DT_LONG_DOUBLE_COMPLEX:
        return {{0, ld}, {sizeof(long double), ld}};
    case DOORBELL_COLL_DT_LONG_DOUBLE_INT:
        return {{0, ld}, {offsetof(LdI, k), sizeof(int)}};
    case DOORBELL_COLL_DT_DOUBLE_INT:
        return {{0, sizeof(double)}, {offsetof(DI, k), sizeof(int)}};
    case DOORBELL_COLL_DT_LONG_INT:
        return {{0, sizeof(long)}, {offsetof(LI, k), sizeof(int)}};
    case DOORBELL_COLL_DT_SHORT_INT:
        return {{0, sizeof(short)}, {offsetof(SI, k), sizeof(int)}};
    default:
        return {{0, dtype_size(t)}};
    }
}

bool same_value(doorbell_coll_dtype_t dtype, const Bytes &a, const Bytes &b, size_t count,
                size_t *first_diff)
{
    size_t e = dtype_size(dtype);
    if (a.size() < count * e || b.size() < count * e) {
        *first_diff = 0;
        return false;
    }
    auto parts = significant(dtype);
    for (size_t i = 0; i < count; i++)
        for (auto [off, len] : parts)
            if (std::memcmp(a.data() + i * e + off, b.data() + i * e + off, len) != 0) {
                *first_diff = i;
                return false;
            }
    return true;
}

Bytes sequential(const Case &c, int n)
{
    Bytes acc = make_input(c, 0);
    for (int r = 1; r < n; r++)
        fold(c, acc, make_input(c, r), 0, c.count);
    return acc;
}

Bytes reference(doorbell_coll_algorithm_t alg, const Case &c, int n,
                const std::vector<int> &node_of, const std::vector<int> &leaf_of)
{
    std::vector<Bytes> x(n);
    for (int r = 0; r < n; r++)
        x[r] = make_input(c, r);
    if (n == 1 || c.count == 0)
        return x[0];
    switch (alg) {
    case DOORBELL_COLL_ALG_RING:
        return ring_order(c, x);
    case DOORBELL_COLL_ALG_RABENSEIFNER:
        return tree(c, x);
    case DOORBELL_COLL_ALG_DIRECT:
    case DOORBELL_COLL_ALG_TWO_STEP:
        return sequential(c, n);
    case DOORBELL_COLL_ALG_HIERARCHICAL: {
        // Nodes in order of their first rank, their ranks folded in order;
        // the nodes of a leaf folded in node order.
        std::map<int, std::vector<int>> by_node;
        std::vector<int>                node_order;
        for (int r = 0; r < n; r++) {
            int id = node_of.empty() ? r : node_of[r];
            if (!by_node.count(id))
                node_order.push_back(id);
            by_node[id].push_back(r);
        }
        std::vector<int>     leaders;
        std::map<int, Bytes> node_val;
        for (int id : node_order) {
            const auto &m   = by_node[id];
            Bytes       acc = x[m[0]];
            for (size_t i = 1; i < m.size(); i++)
                fold(c, acc, x[m[i]], 0, c.count);
            node_val[m[0]] = acc;
            leaders.push_back(m[0]);
        }
        std::vector<Bytes> spine;
        if (leaf_of.empty()) {
            for (int l : leaders)
                spine.push_back(node_val[l]);
        } else {
            std::map<int, Bytes> leaf_val;
            std::vector<int>     leaf_order;
            for (int l : leaders) {
                int id = leaf_of[l];
                if (!leaf_val.count(id)) {
                    leaf_order.push_back(id);
                    leaf_val[id] = node_val[l];
                } else {
                    fold(c, leaf_val[id], node_val[l], 0, c.count);
                }
            }
            for (int id : leaf_order)
                spine.push_back(leaf_val[id]);
        }
        // Two leaves fold in leaf order; more run recursive doubling (node
        // leaders only) or Rabenseifner (every rank owns a slice): the same
        // tree, nearest partner first.
        return tree(c, spine);
    }
    default:
        return tree(c, x);
    }
}

std::vector<std::vector<Outcome>> run_cases(FakeFabric &fabric, int n,
                                            const std::vector<Case>      &cases,
                                            const doorbell_coll_tuning_t &tuning, int absent_rank)
{
    std::vector<std::vector<Outcome>> out(cases.size(), std::vector<Outcome>(n));
    std::vector<std::thread>          threads;
    for (int rank = 0; rank < n; rank++) {
        if (rank == absent_rank)
            continue;
        threads.emplace_back([&, rank] {
            doorbell_coll_team_t team = fabric.team(rank);
            for (size_t i = 0; i < cases.size(); i++) {
                const Case &c        = cases[i];
                Outcome    &o        = out[i][rank];
                Bytes       in       = make_input(c, rank);
                char        err[512] = "";
                if (c.in_place) {
                    o.result = in;
                    o.status = doorbell_coll_allreduce(&team, &tuning, c.alg, nullptr,
                                                       o.result.data(), c.count, c.dtype, c.op, err,
                                                       sizeof(err));
                } else {
                    o.send = in;
                    o.result.assign(in.size(), 0x5a);
                    o.status      = doorbell_coll_allreduce(&team, &tuning, c.alg, o.send.data(),
                                                            o.result.data(), c.count, c.dtype, c.op, err,
                                                            sizeof(err));
                    o.send_intact = o.send == in;
                }
                o.error = err;
                if (o.status != DOORBELL_COLL_OK)
                    return; // the team is unusable now
            }
        });
    }
    for (auto &t : threads)
        t.join();
    return out;
}

} // namespace doorbell::coll::testing
