// Reduction kernels. Semantics follow the MPI standard's op/type table:
//   MAX, MIN         integers, floating point
//   SUM, PROD        integers, floating point, complex
//   LAND, LOR, LXOR  integers, C bool, Fortran LOGICAL (result 0 or 1)
//   BAND, BOR, BXOR  integers, MPI_BYTE
//   MAXLOC, MINLOC   value/index pairs (ties keep the smaller index)
#include "reduce.h"

#include <cstdint>
#include <iterator>
#include <type_traits>

namespace doorbell::coll {
namespace {

template <class V, class I>
struct Pair {
    V v;
    I k;
};

template <class T>
struct Cplx {
    T re, im;
};

enum class Kind {
    kInt,
    kFloat,
    kComplex,
    kBool,
    kLogical,
    kByte,
    kPair
};

struct TypeInfo {
    Kind   kind;
    size_t size;
};

// By doorbell_coll_dtype_t, in its order.
// clang-format off
constexpr TypeInfo kTypes[] = {
    {Kind::kInt, 1},                                /* INT8 */
    {Kind::kInt, 1},                                /* UINT8 */
    {Kind::kInt, 2},                                /* INT16 */
    {Kind::kInt, 2},                                /* UINT16 */
    {Kind::kInt, 4},                                /* INT32 */
    {Kind::kInt, 4},                                /* UINT32 */
    {Kind::kInt, 8},                                /* INT64 */
    {Kind::kInt, 8},                                /* UINT64 */
    {Kind::kFloat, sizeof(float)},                  /* FLOAT */
    {Kind::kFloat, sizeof(double)},                 /* DOUBLE */
    {Kind::kFloat, sizeof(long double)},            /* LONG_DOUBLE */
    {Kind::kComplex, sizeof(Cplx<float>)},          /* FLOAT_COMPLEX */
    {Kind::kComplex, sizeof(Cplx<double>)},         /* DOUBLE_COMPLEX */
    {Kind::kComplex, sizeof(Cplx<long double>)},    /* LONG_DOUBLE_COMPLEX */
    {Kind::kBool, sizeof(bool)},                    /* BOOL */
    {Kind::kLogical, 4},                            /* LOGICAL */
    {Kind::kByte, 1},                               /* BYTE */
    {Kind::kPair, sizeof(Pair<float, int>)},        /* FLOAT_INT */
    {Kind::kPair, sizeof(Pair<double, int>)},       /* DOUBLE_INT */
    {Kind::kPair, sizeof(Pair<long, int>)},         /* LONG_INT */
    {Kind::kPair, sizeof(Pair<int, int>)},          /* 2INT */
    {Kind::kPair, sizeof(Pair<short, int>)},        /* SHORT_INT */
    {Kind::kPair, sizeof(Pair<long double, int>)},  /* LONG_DOUBLE_INT */
    {Kind::kPair, sizeof(Pair<float, float>)},      /* 2FLOAT */
    {Kind::kPair, sizeof(Pair<double, double>)},    /* 2DOUBLE */
};
// clang-format on
static_assert(std::size(kTypes) == DOORBELL_COLL_DT_COUNT, "a row per doorbell_coll_dtype_t");

constexpr TypeInfo type_info(doorbell_coll_dtype_t t)
{
    return unsigned(t) < std::size(kTypes) ? kTypes[t] : TypeInfo{Kind::kByte, 0};
}

// Elementwise loop; F computes one result from (lower, higher).
template <class T, class F>
void each(const void *a, const void *b, void *out, size_t n, F f)
{
    const T *pa = static_cast<const T *>(a);
    const T *pb = static_cast<const T *>(b);
    T       *po = static_cast<T *>(out);
    for (size_t i = 0; i < n; i++)
        po[i] = f(pa[i], pb[i]);
}

// Integers wrap (computed unsigned, at least int-wide: no overflow UB);
// floating point is computed in its own type.
template <class T, bool = std::is_integral_v<T>>
struct WideOf {
    using type = T;
};
template <class T>
struct WideOf<T, true> {
    using type =
        std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
};
template <class T>
using Wide = typename WideOf<T>::type;

template <class T>
void arith(doorbell_coll_op_t op, const void *a, const void *b, void *out, size_t n)
{
    using W = Wide<T>;
    switch (op) {
    case DOORBELL_COLL_OP_SUM:
        each<T>(a, b, out, n, [](T x, T y) { return T(W(x) + W(y)); });
        break;
    case DOORBELL_COLL_OP_PROD:
        each<T>(a, b, out, n, [](T x, T y) { return T(W(x) * W(y)); });
        break;
    // Open MPI's form: keep a unless b is strictly better (NaN handling fixed).
    case DOORBELL_COLL_OP_MAX:
        each<T>(a, b, out, n, [](T x, T y) { return x < y ? y : x; });
        break;
    case DOORBELL_COLL_OP_MIN:
        each<T>(a, b, out, n, [](T x, T y) { return y < x ? y : x; });
        break;
    default:
        break;
    }
}

template <class T>
void logical(doorbell_coll_op_t op, const void *a, const void *b, void *out, size_t n)
{
    switch (op) {
    case DOORBELL_COLL_OP_LAND:
        each<T>(a, b, out, n, [](T x, T y) { return T((x != 0) && (y != 0)); });
        break;
    case DOORBELL_COLL_OP_LOR:
        each<T>(a, b, out, n, [](T x, T y) { return T((x != 0) || (y != 0)); });
        break;
    case DOORBELL_COLL_OP_LXOR:
        each<T>(a, b, out, n, [](T x, T y) { return T((x != 0) != (y != 0)); });
        break;
    default:
        break;
    }
}

template <class T>
void bitwise(doorbell_coll_op_t op, const void *a, const void *b, void *out, size_t n)
{
    switch (op) {
    case DOORBELL_COLL_OP_BAND:
        each<T>(a, b, out, n, [](T x, T y) { return T(x & y); });
        break;
    case DOORBELL_COLL_OP_BOR:
        each<T>(a, b, out, n, [](T x, T y) { return T(x | y); });
        break;
    case DOORBELL_COLL_OP_BXOR:
        each<T>(a, b, out, n, [](T x, T y) { return T(x ^ y); });
        break;
    default:
        break;
    }
}

template <class T>
void integer(doorbell_coll_op_t op, const void *a, const void *b, void *out, size_t n)
{
    switch (op) {
    case DOORBELL_COLL_OP_LAND:
    case DOORBELL_COLL_OP_LOR:
    case DOORBELL_COLL_OP_LXOR:
        logical<T>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_OP_BAND:
    case DOORBELL_COLL_OP_BOR:
    case DOORBELL_COLL_OP_BXOR:
        bitwise<T>(op, a, b, out, n);
        break;
    default:
        arith<T>(op, a, b, out, n);
        break;
    }
}

template <class T>
void complex(doorbell_coll_op_t op, const void *a, const void *b, void *out, size_t n)
{
    using C = Cplx<T>;
    if (op == DOORBELL_COLL_OP_SUM)
        each<C>(a, b, out, n, [](C x, C y) { return C{x.re + y.re, x.im + y.im}; });
    else
        each<C>(a, b, out, n, [](C x, C y) {
            return C{x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
        });
}

template <class V, class I>
void pair(doorbell_coll_op_t op, const void *a, const void *b, void *out, size_t n)
{
    using P = Pair<V, I>;
    if (op == DOORBELL_COLL_OP_MAXLOC)
        each<P>(a, b, out, n, [](P x, P y) {
            if (x.v > y.v)
                return x;
            if (y.v > x.v)
                return y;
            return x.k <= y.k ? x : y;
        });
    else
        each<P>(a, b, out, n, [](P x, P y) {
            if (x.v < y.v)
                return x;
            if (y.v < x.v)
                return y;
            return x.k <= y.k ? x : y;
        });
}

} // namespace

size_t dtype_size(doorbell_coll_dtype_t dtype)
{
    return type_info(dtype).size;
}

bool op_supported(doorbell_coll_dtype_t dtype, doorbell_coll_op_t op)
{
    if (dtype < 0 || dtype >= DOORBELL_COLL_DT_COUNT || op < 0 || op >= DOORBELL_COLL_OP_COUNT)
        return false;
    bool arith = op == DOORBELL_COLL_OP_SUM || op == DOORBELL_COLL_OP_PROD;
    bool order = op == DOORBELL_COLL_OP_MAX || op == DOORBELL_COLL_OP_MIN;
    bool logic = op == DOORBELL_COLL_OP_LAND || op == DOORBELL_COLL_OP_LOR ||
                 op == DOORBELL_COLL_OP_LXOR;
    bool bits = op == DOORBELL_COLL_OP_BAND || op == DOORBELL_COLL_OP_BOR ||
                op == DOORBELL_COLL_OP_BXOR;
    bool loc = op == DOORBELL_COLL_OP_MAXLOC || op == DOORBELL_COLL_OP_MINLOC;
    switch (type_info(dtype).kind) {
    case Kind::kInt:
        return arith || order || logic || bits;
    case Kind::kFloat:
        return arith || order;
    case Kind::kComplex:
        return arith;
    case Kind::kBool:
    case Kind::kLogical:
        return logic;
    case Kind::kByte:
        return bits;
    case Kind::kPair:
        return loc;
    }
    return false;
}

void reduce(doorbell_coll_dtype_t dtype, doorbell_coll_op_t op, const void *a, const void *b,
            void *out, size_t n)
{
    switch (dtype) {
    case DOORBELL_COLL_DT_INT8:
        integer<int8_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_UINT8:
        integer<uint8_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_INT16:
        integer<int16_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_UINT16:
        integer<uint16_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_INT32:
        integer<int32_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_UINT32:
        integer<uint32_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_INT64:
        integer<int64_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_UINT64:
        integer<uint64_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_FLOAT:
        arith<float>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_DOUBLE:
        arith<double>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_LONG_DOUBLE:
        arith<long double>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_FLOAT_COMPLEX:
        complex<float>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_DOUBLE_COMPLEX:
        complex<double>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_LONG_DOUBLE_COMPLEX:
        complex<long double>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_BOOL:
        logical<uint8_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_LOGICAL:
        logical<int32_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_BYTE:
        bitwise<uint8_t>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_FLOAT_INT:
        pair<float, int>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_DOUBLE_INT:
        pair<double, int>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_LONG_INT:
        pair<long, int>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_2INT:
        pair<int, int>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_SHORT_INT:
        pair<short, int>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_LONG_DOUBLE_INT:
        pair<long double, int>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_2FLOAT:
        pair<float, float>(op, a, b, out, n);
        break;
    case DOORBELL_COLL_DT_2DOUBLE:
        pair<double, double>(op, a, b, out, n);
        break;
    default:
        break;
    }
}

} // namespace doorbell::coll
