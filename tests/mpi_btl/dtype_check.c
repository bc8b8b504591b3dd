/*
 * doorbell-dtype-check: point-to-point with derived datatypes, every byte of
 * every receive buffer checked.
 *
 * Each case sends `scount` elements of a send type and receives into
 * `rcount` elements of a receive type with the same type signature (or a
 * longer one: the receive may be larger than the message). Patterns, between
 * rank pairs and to self:
 *   sendrecv   MPI_Sendrecv with the partner (ranks 2k <-> 2k+1)
 *   pingping   both partners MPI_Isend, then MPI_Recv
 *   sendself   MPI_Sendrecv to oneself
 * Types: contiguous, vector, indexed, hindexed (blocks in falling address
 * order), resized(hindexed) nested in hindexed (MPICH pt2pt's pattern, with
 * counts 1/1, 1/2, 17/17, 17/34), struct with padding, a negative lower
 * bound, and receive counts that do not divide the message. Sizes run from a
 * few bytes across the eager/rendezvous boundary to more than 1 MiB.
 *
 * The reference is computed locally: MPI_Pack of the send buffer, MPI_Unpack
 * into a sentinel-filled buffer of the receive type. The received buffer,
 * gaps included, must equal it byte for byte; MPI_Get_count and
 * MPI_Get_elements must say what arrived. Output (rank 0):
 *   <case> <bytes> B: ok | <n> wrong bytes ...
 *   dtype-check: <cases> cases on <n> ranks, <w> wrong bytes, <e> bad counts
 *   digest <16 hex digits>     FNV-1a over every received buffer
 * The digest lets two runs (e.g. over doorbell and plain mpirun) be compared.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 0xa5

typedef struct dt_case {
    char         name[64];
    MPI_Datatype stype, rtype;
    int          scount, rcount;
    int          elements_sent; /* basic elements the message carries */
} dt_case_t;

static int      rank, nranks;
static uint64_t digest = 1469598103934665603ull; /* FNV-1a offset basis */
static long     wrong_bytes, bad_counts, cases_run;

static void fnv(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        digest ^= p[i];
        digest *= 1099511628211ull;
    }
}

/* Bytes spanned by count elements, and the offset of the buffer pointer in
 * its allocation (a negative lower bound moves the data before it). */
static void span(MPI_Datatype t, int count, size_t *bytes, size_t *offset)
{
    MPI_Aint lb, extent, true_lb, true_extent;

    MPI_Type_get_extent(t, &lb, &extent);
    MPI_Type_get_true_extent(t, &true_lb, &true_extent);
    MPI_Aint lo = true_lb < 0 ? true_lb : 0;
    MPI_Aint hi = true_lb + true_extent + (count > 0 ? (count - 1) * extent : 0);
    if (extent < 0) {
        lo += (count - 1) * extent;
    }
    *offset = (size_t)(-lo);
    *bytes  = (size_t)(hi - lo) + 16;
}

static void fill(unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = (unsigned char)((i * 131u + (unsigned)seed * 17u + 7u) & 0xff);
    }
}

/* What the receive buffer must hold: the local datatype engine's result. */
static unsigned char *reference(const dt_case_t *c, const unsigned char *sbuf, size_t rbytes,
                                size_t roff)
{
    int            packed_size, pos = 0;
    unsigned char *packed, *ref     = malloc(rbytes);
    int            ssize, rsize, rcount_used;

    MPI_Pack_size(c->scount, c->stype, MPI_COMM_SELF, &packed_size);
    packed = malloc((size_t)packed_size + 1);
    MPI_Pack(sbuf, c->scount, c->stype, packed, packed_size, &pos, MPI_COMM_SELF);
    memset(ref, SENTINEL, rbytes);
    /* unpack what arrives: whole receive elements, then the partial one */
    MPI_Type_size(c->stype, &ssize);
    MPI_Type_size(c->rtype, &rsize);
    rcount_used  = rsize ? (int)(((long)ssize * c->scount) / rsize) : 0;
    int unpacked = 0;
    MPI_Unpack(packed, pos, &unpacked, ref + roff, rcount_used, c->rtype, MPI_COMM_SELF);
    if (rcount_used > c->rcount || (rcount_used == c->rcount && unpacked < pos)) {
        fprintf(stderr, "case %s: the message does not fit the receive\n", c->name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (unpacked < pos) {
        /* a partial last element: pack what the element holds now
         * (sentinels), overwrite its first bytes with what is left of the
         * message, unpack it back: the ints that arrive land where the
         * engine puts them, the rest keeps the sentinel */
        MPI_Aint       lb, extent;
        int            esize, epos = 0;
        unsigned char *where;

        MPI_Type_get_extent(c->rtype, &lb, &extent);
        MPI_Pack_size(1, c->rtype, MPI_COMM_SELF, &esize);
        unsigned char *elem = malloc((size_t)esize);
        where               = ref + roff + (size_t)rcount_used * (size_t)extent;
        MPI_Pack(where, 1, c->rtype, elem, esize, &epos, MPI_COMM_SELF);
        memcpy(elem, packed + unpacked, (size_t)(pos - unpacked));
        epos = 0;
        MPI_Unpack(elem, esize, &epos, where, 1, c->rtype, MPI_COMM_SELF);
        free(elem);
    }
    free(packed);
    return ref;
}

static void check(const dt_case_t *c, const char *pattern, const unsigned char *rbuf,
                  const unsigned char *ref, size_t rbytes, MPI_Status *st)
{
    long wrong = 0, first = -1;
    int  count, elements, ssize, rsize;

    for (size_t i = 0; i < rbytes; i++) {
        if (rbuf[i] != ref[i]) {
            if (first < 0) {
                first = (long)i;
            }
            wrong++;
        }
    }
    fnv(rbuf, rbytes);
    MPI_Type_size(c->stype, &ssize);
    MPI_Type_size(c->rtype, &rsize);
    long arrived      = (long)ssize * c->scount;
    int  expect_count = (rsize && arrived % rsize == 0) ? (int)(arrived / rsize) : MPI_UNDEFINED;
    MPI_Get_count(st, c->rtype, &count);
    MPI_Get_elements(st, c->rtype, &elements);
    int bad = count != expect_count || (c->elements_sent > 0 && elements != c->elements_sent);
    if (wrong || bad) {
        printf("rank %d: %s %s (%ld B): %ld wrong bytes (first at %ld), "
               "count %d (expected %d), elements %d (expected %d)\n",
               rank, c->name, pattern, arrived, wrong, first, count, expect_count, elements,
               c->elements_sent);
    }
    wrong_bytes += wrong;
    bad_counts += bad;
}

static void run_case(const dt_case_t *c)
{
    size_t      sbytes, soff, rbytes, roff;
    MPI_Status  st;
    MPI_Request req;
    int         partner = (rank ^ 1) < nranks ? (rank ^ 1) : rank;
    int         tag     = (int)(cases_run % 30000);

    span(c->stype, c->scount, &sbytes, &soff);
    span(c->rtype, c->rcount, &rbytes, &roff);
    unsigned char *sbuf = malloc(sbytes), *rbuf = malloc(rbytes);
    /* the partner's data differs from ours: a swapped buffer shows */
    fill(sbuf, sbytes, partner == rank ? rank : (rank < partner ? 1 : 2));

    /* what we receive comes from the partner, whose fill seed is known */
    unsigned char *psbuf = malloc(sbytes);
    fill(psbuf, sbytes, partner == rank ? rank : (partner < rank ? 1 : 2));
    unsigned char *ref = reference(c, psbuf + soff, rbytes, roff);

    /* sendrecv */
    memset(rbuf, SENTINEL, rbytes);
    MPI_Sendrecv(sbuf + soff, c->scount, c->stype, partner, tag, rbuf + roff, c->rcount, c->rtype,
                 partner, tag, MPI_COMM_WORLD, &st);
    check(c, "sendrecv", rbuf, ref, rbytes, &st);

    /* pingping */
    memset(rbuf, SENTINEL, rbytes);
    MPI_Isend(sbuf + soff, c->scount, c->stype, partner, tag + 1, MPI_COMM_WORLD, &req);
    MPI_Recv(rbuf + roff, c->rcount, c->rtype, partner, tag + 1, MPI_COMM_WORLD, &st);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    check(c, "pingping", rbuf, ref, rbytes, &st);

    /* sendself */
    unsigned char *selfref = reference(c, sbuf + soff, rbytes, roff);
    memset(rbuf, SENTINEL, rbytes);
    MPI_Sendrecv(sbuf + soff, c->scount, c->stype, rank, tag + 2, rbuf + roff, c->rcount, c->rtype,
                 rank, tag + 2, MPI_COMM_WORLD, &st);
    check(c, "sendself", rbuf, selfref, rbytes, &st);

    free(selfref);
    free(ref);
    free(psbuf);
    free(sbuf);
    free(rbuf);
    cases_run++;
}

/* ---------------------------------------------------------------- types */

static MPI_Datatype commit(MPI_Datatype t)
{
    MPI_Type_commit(&t);
    return t;
}

static MPI_Datatype contig_ints(int n)
{
    MPI_Datatype t;
    MPI_Type_contiguous(n, MPI_INT, &t);
    return commit(t);
}

/* n blocks of 3 ints, stride 5 ints */
static MPI_Datatype vector_ints(int n)
{
    MPI_Datatype t;
    MPI_Type_vector(n, 3, 5, MPI_INT, &t);
    return commit(t);
}

/* n blocks of 1, 2, 3, 1, 2, 3... ints, each followed by a gap of 2 ints */
static MPI_Datatype indexed_ints(int n, int *ints)
{
    int         *bl = malloc(sizeof(int) * (size_t)n);
    int         *dp = malloc(sizeof(int) * (size_t)n);
    int          at = 0;
    MPI_Datatype t;

    *ints = 0;
    for (int i = 0; i < n; i++) {
        bl[i] = 1 + i % 3;
        dp[i] = at;
        at += bl[i] + 2;
        *ints += bl[i];
    }
    MPI_Type_indexed(n, bl, dp, MPI_INT, &t);
    free(bl);
    free(dp);
    return commit(t);
}

/* n blocks of 2 ints placed in falling address order */
static MPI_Datatype hindexed_falling(int n)
{
    int         *bl = malloc(sizeof(int) * (size_t)n);
    MPI_Aint    *dp = malloc(sizeof(MPI_Aint) * (size_t)n);
    MPI_Datatype t;

    for (int i = 0; i < n; i++) {
        bl[i] = 2;
        dp[i] = (MPI_Aint)(n - 1 - i) * 12;
    }
    MPI_Type_create_hindexed(n, bl, dp, MPI_INT, &t);
    free(bl);
    free(dp);
    return commit(t);
}

/* MPICH pt2pt's nested type: an element is hindexed{2 ints at 0, 1 int at
 * 16 B} resized to a 28-byte extent; the type is n such elements at
 * hindexed displacements with a hole between them. */
static MPI_Datatype nested_resized_hindexed(int n)
{
    int          inner_bl[2] = {2, 1};
    MPI_Aint     inner_dp[2] = {0, 16};
    MPI_Datatype inner, resized, t;
    int         *bl = malloc(sizeof(int) * (size_t)n);
    MPI_Aint    *dp = malloc(sizeof(MPI_Aint) * (size_t)n);

    MPI_Type_create_hindexed(2, inner_bl, inner_dp, MPI_INT, &inner);
    MPI_Type_create_resized(inner, 0, 28, &resized);
    for (int i = 0; i < n; i++) {
        bl[i] = 1 + (i & 1);
        dp[i] = (MPI_Aint)i * 100;
    }
    MPI_Type_create_hindexed(n, bl, dp, resized, &t);
    MPI_Type_free(&inner);
    MPI_Type_free(&resized);
    free(bl);
    free(dp);
    return commit(t);
}

/* MPICH dtpools' resized pattern: an int with a 40-byte extent, resized
 * again to lb -400 and extent 4 (its data lies outside its own bounds), n
 * of them in one hindexed block. */
static MPI_Datatype resized_outside(int n)
{
    MPI_Datatype wide, shifted, t;
    int          bl = n;
    MPI_Aint     dp = 0;

    MPI_Type_create_resized(MPI_INT, 0, 40, &wide);
    MPI_Type_create_resized(wide, -400, 4, &shifted);
    MPI_Type_create_hindexed(1, &bl, &dp, shifted, &t);
    MPI_Type_free(&wide);
    MPI_Type_free(&shifted);
    return commit(t);
}

/* n ints in one hindexed block 400 bytes in, resized to lb 0 and an extent
 * of exactly its size: contiguous and gap-free by its flags, yet its data
 * does not start at the buffer (Open MPI 4.1.4's pml ucx sends it from the
 * buffer's start: wrong data). */
static MPI_Datatype resized_shifted(int n)
{
    MPI_Datatype h, t;
    int          bl = n;
    MPI_Aint     dp = 400;

    MPI_Type_create_hindexed(1, &bl, &dp, MPI_INT, &h);
    MPI_Type_create_resized(h, 0, 4 * (MPI_Aint)n, &t);
    MPI_Type_free(&h);
    return commit(t);
}

/* n elements of hindexed{...} as above: the ints one nested_resized_hindexed
 * element block holds, for the 1/2 and 17/34 count pairs */
static int nested_ints(int n)
{
    int ints = 0;
    for (int i = 0; i < n; i++) {
        ints += 3 * (1 + (i & 1));
    }
    return ints;
}

/* struct {int a; double b; char c[3];} resized to 32 bytes */
typedef struct {
    int    a;
    double b;
    char   c[3];
} rec_t;

static MPI_Datatype struct_rec(void)
{
    int          bl[3] = {1, 1, 3};
    MPI_Aint     dp[3] = {offsetof(rec_t, a), offsetof(rec_t, b), offsetof(rec_t, c)};
    MPI_Datatype ty[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, s, t;

    MPI_Type_create_struct(3, bl, dp, ty, &s);
    MPI_Type_create_resized(s, 0, 32, &t);
    MPI_Type_free(&s);
    return commit(t);
}

/* 3 ints as a struct of three MPI_INT members spread apart */
static MPI_Datatype struct_three_ints(void)
{
    int          bl[3] = {1, 1, 1};
    MPI_Aint     dp[3] = {0, 8, 20};
    MPI_Datatype ty[3] = {MPI_INT, MPI_INT, MPI_INT}, t;

    MPI_Type_create_struct(3, bl, dp, ty, &t);
    return commit(t);
}

/* 2 ints with a negative lower bound: the buffer pointer is past the data */
static MPI_Datatype negative_lb(void)
{
    int          bl[2] = {1, 1};
    MPI_Aint     dp[2] = {-16, -4};
    MPI_Datatype h, t;

    MPI_Type_create_hindexed(2, bl, dp, MPI_INT, &h);
    MPI_Type_create_resized(h, -24, 24, &t);
    MPI_Type_free(&h);
    return commit(t);
}

static void free_case(dt_case_t *c)
{
    MPI_Datatype s = c->stype, r = c->rtype;

    if (s != MPI_INT) {
        MPI_Type_free(&s);
    }
    if (r != MPI_INT && r != c->stype) {
        MPI_Type_free(&r);
    }
}

static void run(dt_case_t c)
{
    run_case(&c);
    free_case(&c);
}

/* Message sizes in ints: a few bytes, around the 8 KiB eager limit, a
 * rendezvous size and more than 1 MiB. */
static const int sizes[] = {2, 1000, 2040, 2100, 16384, 300000};
#define NSIZES (int)(sizeof(sizes) / sizeof(sizes[0]))

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    for (int s = 0; s < NSIZES; s++) {
        int       n = sizes[s], ints;
        dt_case_t c;

        /* contiguous ints, both sides */
        c = (dt_case_t){"contiguous", MPI_INT, MPI_INT, n, n, n};
        run(c);

        /* vector sent, contiguous received (same signature) */
        c = (dt_case_t){"vector->contiguous", vector_ints(n / 3 + 1), MPI_DATATYPE_NULL, 1, 0, 0};
        c.elements_sent = 3 * (n / 3 + 1);
        c.rtype         = contig_ints(c.elements_sent);
        c.rcount        = 1;
        run(c);

        /* contiguous sent, vector received */
        c = (dt_case_t){"contiguous->vector", MPI_INT, vector_ints(n / 3 + 1),
                        3 * (n / 3 + 1),      1,       3 * (n / 3 + 1)};
        run(c);

        /* indexed both sides */
        MPI_Datatype ix = indexed_ints(n / 2 + 1, &ints);
        c               = (dt_case_t){"indexed", ix, ix, 1, 1, ints};
        run(c);

        /* contiguous sent, hindexed in falling order received */
        c = (dt_case_t){"contiguous->hindexed", MPI_INT, hindexed_falling(n / 2 + 1),
                        2 * (n / 2 + 1),        1,       2 * (n / 2 + 1)};
        run(c);

        /* nested resized(hindexed) in hindexed, MPICH's counts: 1/1, 1/2,
         * 17/17, 17/34 (the receive type holds half the elements) */
        /* even element counts: 2k elements of the pattern 1,2,1,2... hold
         * as many ints as twice k */
        int k = 2 * (n / 80 + 1), m = 2 * (k / 16 + 1);
        c       = (dt_case_t){"nested 1/1",  nested_resized_hindexed(k), MPI_DATATYPE_NULL, 1, 1,
                              nested_ints(k)};
        c.rtype = c.stype;
        run(c);
        c = (dt_case_t){
            "nested 1/2",      nested_resized_hindexed(2 * k), nested_resized_hindexed(k), 1, 2,
            nested_ints(2 * k)};
        run(c);
        c = (dt_case_t){"nested 17/17", nested_resized_hindexed(m), MPI_DATATYPE_NULL, 17, 17, 0};
        c.rtype         = c.stype;
        c.elements_sent = 17 * nested_ints(m);
        run(c);
        c = (dt_case_t){"nested 17/34",
                        nested_resized_hindexed(2 * m),
                        nested_resized_hindexed(m),
                        17,
                        34,
                        17 * nested_ints(2 * m)};
        run(c);

        /* data outside the type's bounds, counts 1/1, 1/2, 17/17, 17/34 */
        c = (dt_case_t){"resized-outside 1/1", resized_outside(n), MPI_DATATYPE_NULL, 1, 1, n};
        c.rtype = c.stype;
        run(c);
        c = (dt_case_t){
            "resized-outside 1/2", resized_outside(2 * n), resized_outside(n), 1, 2, 2 * n};
        run(c);
        c = (dt_case_t){
            "resized-outside 17/17", resized_outside(n / 16 + 1), MPI_DATATYPE_NULL, 17, 17,
            17 * (n / 16 + 1)};
        c.rtype = c.stype;
        run(c);
        c = (dt_case_t){"resized-outside 17/34",
                        resized_outside(2 * (n / 16 + 1)),
                        resized_outside(n / 16 + 1),
                        17,
                        34,
                        34 * (n / 16 + 1)};
        run(c);

        /* data displaced from a zero lower bound, same counts */
        c = (dt_case_t){"resized-shifted 1/1", resized_shifted(n), MPI_DATATYPE_NULL, 1, 1, n};
        c.rtype = c.stype;
        run(c);
        c = (dt_case_t){
            "resized-shifted 1/2", resized_shifted(2 * n), resized_shifted(n), 1, 2, 2 * n};
        run(c);
        c = (dt_case_t){
            "resized-shifted 17/17", resized_shifted(n / 16 + 1), MPI_DATATYPE_NULL, 17, 17,
            17 * (n / 16 + 1)};
        c.rtype = c.stype;
        run(c);
        c = (dt_case_t){"resized-shifted 17/34",
                        resized_shifted(2 * (n / 16 + 1)),
                        resized_shifted(n / 16 + 1),
                        17,
                        34,
                        34 * (n / 16 + 1)};
        run(c);

        /* struct with padding, both sides */
        c       = (dt_case_t){"struct", struct_rec(), MPI_DATATYPE_NULL, n / 4 + 1, n / 4 + 1, 0};
        c.rtype = c.stype;
        c.elements_sent = 5 * (n / 4 + 1); /* int, double, 3 chars */
        run(c);

        /* struct of ints sent, contiguous ints received */
        c = (dt_case_t){"struct->contiguous", struct_three_ints(), MPI_INT, n / 3 + 1,
                        3 * (n / 3 + 1),      3 * (n / 3 + 1)};
        run(c);

        /* a receive count that does not divide the message: 3-int blocks
         * sent, 2-int elements received, one element left half full */
        int blocks = (n / 3) | 1;
        c          = (dt_case_t){"non-dividing",       vector_ints(blocks), contig_ints(2), 1,
                                 (3 * blocks + 1) / 2, 3 * blocks};
        run(c);

        /* negative lower bound, both sides */
        c       = (dt_case_t){"negative-lb", negative_lb(), MPI_DATATYPE_NULL,
                              n / 2 + 1,     n / 2 + 1,     2 * (n / 2 + 1)};
        c.rtype = c.stype;
        run(c);
    }

    long totals[3] = {wrong_bytes, bad_counts, cases_run}, sums[3];
    MPI_Reduce(totals, sums, 3, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    uint64_t *all = rank == 0 ? malloc(sizeof(uint64_t) * (size_t)nranks) : NULL;
    MPI_Gather(&digest, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        digest = 1469598103934665603ull;
        fnv((const unsigned char *)all, sizeof(uint64_t) * (size_t)nranks);
        printf("dtype-check: %ld cases on %d ranks, %ld wrong bytes, %ld bad "
               "counts\n",
               sums[2] / nranks, nranks, sums[0], sums[1]);
        printf("digest %016llx\n", (unsigned long long)digest);
        free(all);
    }
    MPI_Finalize();
    return (rank == 0 && (sums[0] != 0 || sums[1] != 0)) ? 1 : 0;
}
