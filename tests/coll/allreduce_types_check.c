/*
 * Every predefined op on every predefined type MPI defines it for, through
 * MPI_Allreduce, checked on every rank against MPI_Reduce_local of all the
 * ranks' inputs (Open MPI's own kernels), in or out of place. The inputs
 * reduce exactly in any order (small integers, powers of two, values without
 * arithmetic), so the reference does not depend on the algorithm's order.
 * Random floating-point sums, which do depend on it, must carry the same
 * bits on every rank.
 */
#include "allreduce_types_check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind {
    K_SINT,
    K_UINT,
    K_FINT,
    K_FLOAT,
    K_COMPLEX,
    K_BOOL,
    K_LOGICAL,
    K_BYTE,
    K_PAIR
};

/* A type, how its values are made, and which bytes of an element carry them
 * (long double has padding, pairs may have a hole). */
typedef struct {
    const char  *name;
    MPI_Datatype dt;
    enum kind    kind;
    int          width;                /* bytes of one scalar (of the value, for pairs) */
    int          fp;                   /* pairs and complex: the value is floating point */
    int          index_off, index_int; /* pairs: offset of the index; an int? */
    int          sig;                  /* significant bytes of one scalar */
} type_t;

#define T(name, kind, width, fp, ioff, iint, sig)     \
    {                                                 \
#name, name, kind, width, fp, ioff, iint, sig \
    }

static const type_t types[] = {
    /* clang-format off */
    T(MPI_CHAR, K_SINT, 1, 0, 0, 0, 1), /* not MPI's, but Open MPI's int8_t */
    T(MPI_SIGNED_CHAR, K_SINT, 1, 0, 0, 0, 1),
    T(MPI_UNSIGNED_CHAR, K_UINT, 1, 0, 0, 0, 1),
    T(MPI_SHORT, K_SINT, sizeof(short), 0, 0, 0, sizeof(short)),
    T(MPI_UNSIGNED_SHORT, K_UINT, sizeof(short), 0, 0, 0, sizeof(short)),
    T(MPI_INT, K_SINT, sizeof(int), 0, 0, 0, sizeof(int)),
    T(MPI_UNSIGNED, K_UINT, sizeof(int), 0, 0, 0, sizeof(int)),
    T(MPI_LONG, K_SINT, sizeof(long), 0, 0, 0, sizeof(long)),
    T(MPI_UNSIGNED_LONG, K_UINT, sizeof(long), 0, 0, 0, sizeof(long)),
    T(MPI_LONG_LONG, K_SINT, sizeof(long long), 0, 0, 0, sizeof(long long)),
    T(MPI_UNSIGNED_LONG_LONG, K_UINT, sizeof(long long), 0, 0, 0, sizeof(long long)),
    T(MPI_INT8_T, K_SINT, 1, 0, 0, 0, 1),
    T(MPI_UINT8_T, K_UINT, 1, 0, 0, 0, 1),
    T(MPI_INT16_T, K_SINT, 2, 0, 0, 0, 2),
    T(MPI_UINT16_T, K_UINT, 2, 0, 0, 0, 2),
    T(MPI_INT32_T, K_SINT, 4, 0, 0, 0, 4),
    T(MPI_UINT32_T, K_UINT, 4, 0, 0, 0, 4),
    T(MPI_INT64_T, K_SINT, 8, 0, 0, 0, 8),
    T(MPI_UINT64_T, K_UINT, 8, 0, 0, 0, 8),
    T(MPI_AINT, K_SINT, sizeof(MPI_Aint), 0, 0, 0, sizeof(MPI_Aint)),
    T(MPI_OFFSET, K_SINT, sizeof(MPI_Offset), 0, 0, 0, sizeof(MPI_Offset)),
    T(MPI_COUNT, K_SINT, sizeof(MPI_Count), 0, 0, 0, sizeof(MPI_Count)),
    T(MPI_INTEGER, K_FINT, 4, 0, 0, 0, 4),
    T(MPI_FLOAT, K_FLOAT, 4, 1, 0, 0, 4),
    T(MPI_DOUBLE, K_FLOAT, 8, 1, 0, 0, 8),
    T(MPI_LONG_DOUBLE, K_FLOAT, sizeof(long double), 1, 0, 0, 10),
    T(MPI_REAL, K_FLOAT, 4, 1, 0, 0, 4),
    T(MPI_DOUBLE_PRECISION, K_FLOAT, 8, 1, 0, 0, 8),
    T(MPI_C_FLOAT_COMPLEX, K_COMPLEX, 4, 1, 0, 0, 4),
    T(MPI_C_DOUBLE_COMPLEX, K_COMPLEX, 8, 1, 0, 0, 8),
    T(MPI_C_LONG_DOUBLE_COMPLEX, K_COMPLEX, sizeof(long double), 1, 0, 0, 10),
    T(MPI_CXX_DOUBLE_COMPLEX, K_COMPLEX, 8, 1, 0, 0, 8),
    T(MPI_COMPLEX, K_COMPLEX, 4, 1, 0, 0, 4),
    T(MPI_C_BOOL, K_BOOL, 1, 0, 0, 0, 1),
    T(MPI_LOGICAL, K_LOGICAL, 4, 0, 0, 0, 4),
    T(MPI_BYTE, K_BYTE, 1, 0, 0, 0, 1),
    T(MPI_FLOAT_INT, K_PAIR, 4, 1, 4, 1, 4),
    T(MPI_DOUBLE_INT, K_PAIR, 8, 1, 8, 1, 8),
    T(MPI_LONG_INT, K_PAIR, sizeof(long), 0, sizeof(long), 1, sizeof(long)),
    T(MPI_2INT, K_PAIR, 4, 0, 4, 1, 4),
    T(MPI_SHORT_INT, K_PAIR, sizeof(short), 0, 4, 1, sizeof(short)),
    T(MPI_LONG_DOUBLE_INT, K_PAIR, sizeof(long double), 1, sizeof(long double), 1, 10),
    T(MPI_2INTEGER, K_PAIR, 4, 0, 4, 1, 4),
    T(MPI_2REAL, K_PAIR, 4, 1, 4, 0, 4),
    T(MPI_2DOUBLE_PRECISION, K_PAIR, 8, 1, 8, 0, 8),
    /* clang-format on */
};

typedef struct {
    MPI_Op      op;
    const char *name;
} op_t;

static const op_t ops[] = {
    {MPI_SUM, "MPI_SUM"},   {MPI_PROD, "MPI_PROD"},     {MPI_MAX, "MPI_MAX"},
    {MPI_MIN, "MPI_MIN"},   {MPI_LAND, "MPI_LAND"},     {MPI_LOR, "MPI_LOR"},
    {MPI_LXOR, "MPI_LXOR"}, {MPI_BAND, "MPI_BAND"},     {MPI_BOR, "MPI_BOR"},
    {MPI_BXOR, "MPI_BXOR"}, {MPI_MAXLOC, "MPI_MAXLOC"}, {MPI_MINLOC, "MPI_MINLOC"},
};

/* Does MPI define op on this kind of type? */
static int defined(const type_t *t, MPI_Op op)
{
    int arith = op == MPI_SUM || op == MPI_PROD, order = op == MPI_MAX || op == MPI_MIN;
    int logic = op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR;
    int bits  = op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR;

    switch (t->kind) {
    case K_SINT:
    case K_UINT:
        return arith || order || logic || bits;
    case K_FINT: /* Fortran integers: no logical ops */
        return arith || order || bits;
    case K_FLOAT:
        return arith || order;
    case K_COMPLEX:
        return arith;
    case K_BOOL:
    case K_LOGICAL:
        return logic;
    case K_BYTE:
        return bits;
    case K_PAIR:
        return op == MPI_MAXLOC || op == MPI_MINLOC;
    }
    return 0;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Store a floating-point value in a scalar of `width` bytes. */
static void put_fp(unsigned char *p, int width, double v)
{
    if (width == 4) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (width == 8) {
        memcpy(p, &v, 8);
    } else {
        long double l = v;
        memcpy(p, &l, sizeof(l));
    }
}

/* Store an integer value in a scalar of `width` bytes (little endian). */
static void put_int(unsigned char *p, int width, int64_t v)
{
    memcpy(p, &v, (size_t)width);
}

/* Element i of `rank`'s input: values every order reduces exactly. */
static void fill(const type_t *t, MPI_Op op, int rank, int seed, size_t count, size_t extent,
                 unsigned char *buf)
{
    static const double pow2[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
    static const int    re[] = {1, -1, 0, 0, 1, 1}, im[] = {0, 0, 1, -1, 1, -1};

    memset(buf, 0, count * extent);
    for (size_t i = 0; i < count; i++) {
        uint64_t       v = mix(((uint64_t)seed << 40) ^ ((uint64_t)rank << 32) ^ i);
        unsigned char *e = buf + i * extent;
        switch (t->kind) {
        case K_SINT:
        case K_UINT:
        case K_FINT:
            if (op == MPI_SUM) /* no overflow: signed overflow is undefined */
                put_int(e, t->width, (int64_t)(v % 31) - 15);
            else if (op == MPI_PROD)
                put_int(e, t->width, v % 3 == 0 ? -1 : (int64_t)(v % 3));
            else if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR)
                put_int(e, t->width, v % 4 == 0 ? 0 : (int64_t)(v % 5) + 1);
            else
                put_int(e, t->width, (int64_t)(v >> 3));
            if (t->kind == K_UINT && op == MPI_SUM)
                put_int(e, t->width, (int64_t)(v % 31));
            break;
        case K_FLOAT:
            if (op == MPI_SUM)
                put_fp(e, t->width, (double)((int)(v % 17) - 8));
            else if (op == MPI_PROD)
                put_fp(e, t->width, pow2[v % 6]);
            else
                put_fp(e, t->width,
                       ldexp((double)(v >> 11) / 9007199254740992.0 - 0.5, (int)(v % 9) - 4));
            break;
        case K_COMPLEX:
            if (op == MPI_PROD) {
                put_fp(e, t->width, re[v % 6]);
                put_fp(e + extent / 2, t->width, im[v % 6]);
            } else {
                put_fp(e, t->width, (double)((int)(v % 17) - 8));
                put_fp(e + extent / 2, t->width, (double)((int)((v >> 8) % 17) - 8));
            }
            break;
        case K_BOOL:
        case K_LOGICAL:
            put_int(e, t->width, v % 3 == 0 ? 0 : 1);
            break;
        case K_BYTE:
            e[0] = (unsigned char)v;
            break;
        case K_PAIR: /* few values: ties, decided by the index */
            if (t->fp)
                put_fp(e, t->width, (double)(v % 4));
            else
                put_int(e, t->width, (int64_t)(v % 4));
            if (t->index_int)
                put_int(e + t->index_off, 4, (int64_t)((v >> 8) % 6));
            else
                put_fp(e + t->index_off, t->width, (double)((v >> 8) % 6));
            break;
        }
    }
}

/* A floating-point scalar of `width` bytes. */
static long double get_fp(const unsigned char *p, int width)
{
    float       f;
    double      d;
    long double l;

    if (width == 4) {
        memcpy(&f, p, 4);
        return f;
    }
    if (width == 8) {
        memcpy(&d, p, 8);
        return d;
    }
    memcpy(&l, p, sizeof(l));
    return l;
}

/* Index of the first element whose significant bytes differ, or -1. With
 * `as_numbers`, complex values compare as numbers: the sign of a zero in a
 * product depends on the order of the factors. */
static long first_diff(const type_t *t, const unsigned char *a, const unsigned char *b,
                       size_t count, size_t extent, int as_numbers)
{
    for (size_t i = 0; i < count; i++) {
        const unsigned char *x = a + i * extent, *y = b + i * extent;
        int                  same = memcmp(x, y, (size_t)t->sig) == 0;
        if (t->kind == K_COMPLEX && as_numbers)
            same = get_fp(x, t->width) == get_fp(y, t->width) &&
                   get_fp(x + extent / 2, t->width) == get_fp(y + extent / 2, t->width);
        else if (t->kind == K_COMPLEX)
            same = same && memcmp(x + extent / 2, y + extent / 2, (size_t)t->sig) == 0;
        if (t->kind == K_PAIR)
            same = same && memcmp(x + t->index_off, y + t->index_off,
                                  t->index_int ? 4 : (size_t)t->sig) == 0;
        if (!same)
            return (long)i;
    }
    return -1;
}

/* FNV-1a over the significant bytes of every exact case's result, in case
 * order: two jobs that reduce with different algorithms (or modules) give
 * the same digest when their results carry the same bits. Zeros of complex
 * values count as +0 (the sign of a zero in a complex product depends on the
 * order of the factors; the reference comparison above treats it so too). */
static uint64_t digest = 1469598103934665603ull;

static void digest_bytes(const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        digest = (digest ^ p[i]) * 1099511628211ull;
}

static void digest_scalar(const type_t *t, const unsigned char *p)
{
    static const unsigned char zero[16];

    if (t->kind == K_COMPLEX && get_fp(p, t->width) == 0)
        p = zero;
    digest_bytes(p, (size_t)t->sig);
}

static void digest_result(const type_t *t, const unsigned char *out, size_t count, size_t extent)
{
    for (size_t i = 0; i < count; i++) {
        const unsigned char *e = out + i * extent;
        digest_scalar(t, e);
        if (t->kind == K_COMPLEX)
            digest_scalar(t, e + extent / 2);
        if (t->kind == K_PAIR)
            digest_bytes(e + t->index_off, t->index_int ? 4 : (size_t)t->sig);
    }
}

uint64_t every_type_digest(void)
{
    return digest;
}

static int check_one(MPI_Comm comm, const type_t *t, const op_t *o, size_t count, int in_place,
                     int seed)
{
    int            me, n, rc, bad = 0;
    MPI_Aint       lb, extent;
    unsigned char *in, *out, *ref, *x;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    MPI_Type_get_extent(t->dt, &lb, &extent);
    in  = malloc(count * extent + 1);
    out = malloc(count * extent + 1);
    ref = malloc(count * extent + 1);
    x   = malloc(count * extent + 1);
    fill(t, o->op, me, seed, count, (size_t)extent, in);
    if (in_place)
        memcpy(out, in, count * extent);
    else
        memset(out, 0x5a, count * extent);
    rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, (int)count, t->dt, o->op, comm);
    if (rc != MPI_SUCCESS) {
        /* The ranks would part ways (the next collectives would not match). */
        printf("TYPES FAIL rank %d: %s on %s, count %zu: MPI_Allreduce returned %d\n", me, o->name,
               t->name, count, rc);
        fflush(stdout);
        MPI_Abort(comm, 1);
    }
    /* x0 op (x1 op (... op x(n-1))) with Open MPI's kernels. */
    fill(t, o->op, n - 1, seed, count, (size_t)extent, ref);
    for (int r = n - 2; r >= 0; r--) {
        fill(t, o->op, r, seed, count, (size_t)extent, x);
        MPI_Reduce_local(x, ref, (int)count, t->dt, o->op);
    }
    long d = first_diff(t, out, ref, count, (size_t)extent, 1);
    if (d >= 0) {
        printf("TYPES FAIL rank %d: %s on %s, count %zu, in place %d: element %ld differs from "
               "the reference\n",
               me, o->name, t->name, count, in_place, d);
        bad = 1;
    }
    digest_result(t, out, count, (size_t)extent);
    /* The same bits on every rank, signs of zeros included. */
    memcpy(x, out, count * extent);
    MPI_Bcast(x, (int)(count * extent), MPI_BYTE, 0, comm);
    d = first_diff(t, out, x, count, (size_t)extent, 0);
    if (d >= 0) {
        printf("TYPES FAIL rank %d: %s on %s, count %zu: element %ld differs from rank 0's bits\n",
               me, o->name, t->name, count, d);
        bad = 1;
    }
    free(in);
    free(out);
    free(ref);
    free(x);
    return bad;
}

/* Random sums of full-mantissa values: the bits depend on the order, and
 * must be the same on every rank. */
static int check_same_bits(MPI_Comm comm, const type_t *t, size_t count, int seed)
{
    int            me, n, bad = 0;
    MPI_Aint       lb, extent;
    unsigned char *in, *out, *first;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    MPI_Type_get_extent(t->dt, &lb, &extent);
    in    = malloc(count * extent + 1);
    out   = malloc(count * extent + 1);
    first = malloc(count * extent + 1);
    fill(t, MPI_MAX, me, seed, count, (size_t)extent, in); /* full mantissas */
    MPI_Allreduce(in, out, (int)count, t->dt, MPI_SUM, comm);
    memcpy(first, out, count * extent);
    MPI_Bcast(first, (int)(count * extent), MPI_BYTE, 0, comm);
    long d = first_diff(t, out, first, count, (size_t)extent, 0);
    if (d >= 0) {
        printf("TYPES FAIL rank %d: random MPI_SUM on %s, count %zu: element %ld differs from "
               "rank 0's bits\n",
               me, t->name, count, d);
        bad = 1;
    }
    free(in);
    free(out);
    free(first);
    return bad;
}

int check_every_type(MPI_Comm comm, const size_t *counts, int ncounts, int seed, int *cases_p)
{
    int failures = 0, cases = 0, k = 0;

    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        const type_t *t = &types[ti];
        if (t->dt == MPI_DATATYPE_NULL)
            continue;
        for (size_t oi = 0; oi < sizeof(ops) / sizeof(ops[0]); oi++) {
            if (!defined(t, ops[oi].op))
                continue;
            for (int c = 0; c < ncounts; c++, k++) {
                failures += check_one(comm, t, &ops[oi], counts[c], k % 2, seed + k);
                cases++;
            }
        }
        if (t->kind == K_FLOAT) {
            for (int c = 0; c < ncounts; c++, k++) {
                failures += check_same_bits(comm, t, counts[c], seed + k);
                cases++;
            }
        }
    }
    *cases_p = cases;
    return failures;
}
