/*
 * doorbell-rma-check: one-sided MPI, every result checked, on a window made
 * by MPI_Win_allocate and on one made by MPI_Win_create.
 *   fence             MPI_Put to the right neighbour and MPI_Get from it (8 B
 *                     and 1 MiB); MPI_Accumulate into rank 0: MPI_SUM of
 *                     longs and of ints (32-bit words), MPI_BXOR, MPI_MAX of
 *                     unsigned ints with the top bit set (a signed maximum
 *                     would keep 0), MPI_MIN of negative ints, MPI_REPLACE
 *   PSCW              post/start/complete/wait: a put to the right, a get
 *                     from the left
 *   passive target    MPI_Win_lock(EXCLUSIVE)/put/flush/get/unlock;
 *                     MPI_Win_lock_all/flush: MPI_Fetch_and_op MPI_SUM on a
 *                     long and on an int (every fetched value distinct, the
 *                     totals exact), MPI_REPLACE (the fetched values and the
 *                     last one are exactly the values written), MPI_BOR of
 *                     one bit per rank; MPI_Compare_and_swap increments of a
 *                     word of rank 0 by every other rank (exactly
 *                     ROUNDS per rank)
 * Arguments: "self": every rank also compare-and-swaps a word of its own
 * window; "no-cas": no compare-and-swap at all, "no-umax": no unsigned
 * maximum (osc rdma over vader, plain mpirun's one-sided path on one host in
 * Open MPI 4.1.4, crashes the target of a compare-and-swap and takes the
 * maximum of unsigned ints as signed).
 * Output (rank 0): "rma-check: <n> ranks, <e> errors, digest <16 hex>" (the
 * digest of every rank's windows at the end, the same on every correct
 * stack); exit status 1 on any error.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG    (1 << 20) /* bytes of the large put/get */
#define ROUNDS 40        /* fetch-and-op and compare-and-swap rounds */

static int  rank, nranks, self_cas, no_cas, no_umax;
static long errors;

static void expect(int ok, const char *win, const char *what, long a, long b)
{
    if (!ok) {
        printf("rank %d (%s): %s: got %ld, expected %ld\n", rank, win, what, a, b);
        errors++;
    }
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* Layout of each rank's window, in bytes. */
enum {
    OFF_SMALL    = 0,    /* 8 B written by the left neighbour */
    OFF_ACC      = 64,   /* long, MPI_SUM of every rank (rank 0) */
    OFF_ACC32    = 72,   /* int, MPI_SUM of every rank (rank 0) */
    OFF_XOR      = 80,   /* unsigned long, MPI_BXOR (rank 0) */
    OFF_MAX      = 88,   /* unsigned int, MPI_MAX (rank 0) */
    OFF_MIN      = 92,   /* int, MPI_MIN (rank 0) */
    OFF_REPL     = 96,   /* long, MPI_REPLACE by the last rank (rank 0) */
    OFF_COUNTER  = 128,  /* long, fetch-and-op counter (rank 0) */
    OFF_COUNT32  = 136,  /* int, fetch-and-op counter (rank 0) */
    OFF_SWAP     = 144,  /* long, fetch-and-op MPI_REPLACE (rank 0) */
    OFF_BITS     = 152,  /* unsigned long, fetch-and-op MPI_BOR (rank 0) */
    OFF_CAS      = 192,  /* long, compare-and-swap word (rank 0) */
    OFF_CAS_SELF = 200,  /* long, compare-and-swap on one's own window */
    OFF_PASSIVE  = 256,  /* 64 B, passive-target put/get */
    OFF_PSCW     = 512,  /* 64 B, written by the left neighbour in PSCW */
    OFF_BIG      = 4096, /* BIG bytes written by the left neighbour */
    WIN_BYTES    = 4096 + BIG
};

static unsigned char pattern(int from, size_t i)
{
    return (unsigned char)((size_t)from * 37u + i * 11u + 5u);
}

static long load_long(const unsigned char *p)
{
    long v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

static void fence_section(MPI_Win win, unsigned char *base, const char *name, int right, int left)
{
    unsigned char *big   = malloc(BIG);
    unsigned char *back  = malloc(BIG);
    uint64_t       small = 0x0123456789abcdefull ^ (uint64_t)rank, got_small, back_small;
    long           one   = rank + 1;
    int            one32 = rank + 1;
    unsigned long  bit   = 1ul << (rank % 64);
    unsigned int   top   = (1u << 31) | (unsigned)rank; /* a signed max would keep 0 */
    int            low   = -1000 * (rank + 1);
    long           repl  = 1000 + rank;

    for (size_t i = 0; i < BIG; i++) {
        big[i] = pattern(rank, i);
    }
    MPI_Win_fence(0, win);
    MPI_Put(&small, 8, MPI_BYTE, right, OFF_SMALL, 8, MPI_BYTE, win);
    MPI_Put(big, BIG, MPI_BYTE, right, OFF_BIG, BIG, MPI_BYTE, win);
    MPI_Accumulate(&one, 1, MPI_LONG, 0, OFF_ACC, 1, MPI_LONG, MPI_SUM, win);
    MPI_Accumulate(&one32, 1, MPI_INT, 0, OFF_ACC32, 1, MPI_INT, MPI_SUM, win);
    MPI_Accumulate(&bit, 1, MPI_UNSIGNED_LONG, 0, OFF_XOR, 1, MPI_UNSIGNED_LONG, MPI_BXOR, win);
    MPI_Accumulate(&low, 1, MPI_INT, 0, OFF_MIN, 1, MPI_INT, MPI_MIN, win);
    if (!no_umax) {
        MPI_Accumulate(&top, 1, MPI_UNSIGNED, 0, OFF_MAX, 1, MPI_UNSIGNED, MPI_MAX, win);
    }
    MPI_Win_fence(0, win);
    if (rank == nranks - 1) { /* one writer: the result is known */
        MPI_Accumulate(&repl, 1, MPI_LONG, 0, OFF_REPL, 1, MPI_LONG, MPI_REPLACE, win);
    }
    MPI_Win_fence(0, win);

    memcpy(&got_small, base + OFF_SMALL, 8);
    expect(got_small == (0x0123456789abcdefull ^ (uint64_t)left), name, "put 8 B", (long)got_small,
           (long)(0x0123456789abcdefull ^ (uint64_t)left));
    long bad = 0;
    for (size_t i = 0; i < BIG; i++) {
        bad += base[OFF_BIG + i] != pattern(left, i);
    }
    expect(bad == 0, name, "put 1 MiB, wrong bytes", bad, 0);
    if (rank == 0) {
        long          n = nranks, acc = load_long(base + OFF_ACC);
        int           acc32;
        unsigned long x = 0, xo;
        unsigned int  mx;
        int           mn;
        memcpy(&acc32, base + OFF_ACC32, sizeof(acc32));
        memcpy(&xo, base + OFF_XOR, sizeof(xo));
        memcpy(&mx, base + OFF_MAX, sizeof(mx));
        memcpy(&mn, base + OFF_MIN, sizeof(mn));
        for (int r = 0; r < nranks; r++) {
            x ^= 1ul << (r % 64);
        }
        expect(acc == n * (n + 1) / 2, name, "accumulate sum", acc, n * (n + 1) / 2);
        expect(acc32 == n * (n + 1) / 2, name, "accumulate int sum", acc32, n * (n + 1) / 2);
        expect(xo == x, name, "accumulate bxor", (long)xo, (long)x);
        if (!no_umax) {
            expect(mx == ((1u << 31) | (unsigned)(nranks - 1)), name, "accumulate unsigned max",
                   (long)mx, (long)((1u << 31) | (unsigned)(nranks - 1)));
        }
        expect(mn == -1000 * nranks, name, "accumulate min", mn, -1000 * nranks);
        expect(load_long(base + OFF_REPL) == 1000 + nranks - 1, name, "accumulate replace",
               load_long(base + OFF_REPL), 1000 + nranks - 1);
    }

    MPI_Win_fence(0, win);
    MPI_Get(&back_small, 8, MPI_BYTE, right, OFF_SMALL, 8, MPI_BYTE, win);
    MPI_Get(back, BIG, MPI_BYTE, right, OFF_BIG, BIG, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    expect(back_small == small, name, "get 8 B", (long)back_small, (long)small);
    expect(memcmp(back, big, BIG) == 0, name, "get 1 MiB equal", 0, 1);
    free(back);
    free(big);
}

static void pscw_section(MPI_Win win, unsigned char *base, const char *name, int right, int left)
{
    MPI_Group     world, to, from;
    unsigned char mine[64], seen[64];

    for (int i = 0; i < 64; i++) {
        mine[i] = pattern(rank + 50, (size_t)i);
    }
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &right, &to);
    MPI_Group_incl(world, 1, &left, &from);
    /* expose to the left neighbour, access the right one */
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Put(mine, 64, MPI_BYTE, right, OFF_PSCW, 64, MPI_BYTE, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    long bad = 0;
    for (int i = 0; i < 64; i++) {
        bad += base[OFF_PSCW + i] != pattern(left + 50, (size_t)i);
    }
    expect(bad == 0, name, "PSCW put, wrong bytes", bad, 0);
    /* and read it back from the right one */
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Get(seen, 64, MPI_BYTE, right, OFF_PSCW, 64, MPI_BYTE, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    expect(memcmp(seen, mine, 64) == 0, name, "PSCW get equal", 0, 1);
    MPI_Group_free(&to);
    MPI_Group_free(&from);
    MPI_Group_free(&world);
}

/* CAS increments of the long at off of target, from this rank, ROUNDS
 * successes. */
static long cas_increments(MPI_Win win, int target, int off)
{
    long successes = 0, tries = 0;
    while (successes < ROUNDS && tries < 1000000) {
        long seen, expected = 0, next;
        MPI_Fetch_and_op(NULL, &expected, MPI_LONG, target, off, MPI_NO_OP, win);
        MPI_Win_flush(target, win);
        next = expected + 1;
        MPI_Compare_and_swap(&next, &expected, &seen, MPI_LONG, target, off, win);
        MPI_Win_flush(target, win);
        successes += seen == expected;
        tries++;
    }
    return successes;
}

static void passive_section(MPI_Win win, unsigned char *base, const char *name, int right)
{
    unsigned char mine[64], again[64];
    long          fetched[ROUNDS], swapped[ROUNDS], inc = 1;
    int           fetched32[ROUNDS], inc32 = 1;
    unsigned long bit = 1ul << (rank % 64), bits_seen;

    for (int i = 0; i < 64; i++) {
        mine[i] = pattern(rank + 100, (size_t)i);
    }
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Put(mine, 64, MPI_BYTE, right, OFF_PASSIVE, 64, MPI_BYTE, win);
    MPI_Win_flush(right, win);
    MPI_Get(again, 64, MPI_BYTE, right, OFF_PASSIVE, 64, MPI_BYTE, win);
    MPI_Win_unlock(right, win);
    expect(memcmp(mine, again, 64) == 0, name, "lock/put/flush/get", 0, 1);

    MPI_Win_lock_all(0, win);
    for (int r = 0; r < ROUNDS; r++) {
        long mine_v = (long)rank * ROUNDS + r + 1;
        MPI_Fetch_and_op(&inc, &fetched[r], MPI_LONG, 0, OFF_COUNTER, MPI_SUM, win);
        MPI_Fetch_and_op(&inc32, &fetched32[r], MPI_INT, 0, OFF_COUNT32, MPI_SUM, win);
        MPI_Fetch_and_op(&mine_v, &swapped[r], MPI_LONG, 0, OFF_SWAP, MPI_REPLACE, win);
        MPI_Win_flush(0, win);
    }
    MPI_Fetch_and_op(&bit, &bits_seen, MPI_UNSIGNED_LONG, 0, OFF_BITS, MPI_BOR, win);
    MPI_Win_flush(0, win);
    long cas = (rank == 0 || no_cas) ? ROUNDS : cas_increments(win, 0, OFF_CAS);
    if (self_cas) {
        long own = cas_increments(win, rank, OFF_CAS_SELF);
        expect(own == ROUNDS, name, "compare-and-swap on its own window", own, ROUNDS);
    }
    MPI_Win_unlock_all(win);
    expect(cas == ROUNDS, name, "compare-and-swap successes", cas, ROUNDS);
    MPI_Barrier(MPI_COMM_WORLD);
    /* every rank's atomics are done: make them visible to this process's
     * loads of its own window */
    MPI_Win_lock_all(0, win);
    MPI_Win_sync(win);
    MPI_Win_unlock_all(win);
    if (self_cas) {
        expect(load_long(base + OFF_CAS_SELF) == ROUNDS, name, "own compare-and-swap word",
               load_long(base + OFF_CAS_SELF), ROUNDS);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    long  n     = (long)ROUNDS * nranks;
    long *all   = rank == 0 ? malloc(sizeof(long) * (size_t)n) : NULL;
    long *swp   = rank == 0 ? malloc(sizeof(long) * (size_t)(n + 1)) : NULL;
    int  *all32 = rank == 0 ? malloc(sizeof(int) * (size_t)n) : NULL;
    MPI_Gather(fetched, ROUNDS, MPI_LONG, all, ROUNDS, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Gather(fetched32, ROUNDS, MPI_INT, all32, ROUNDS, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(swapped, ROUNDS, MPI_LONG, swp, ROUNDS, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(all, (size_t)n, sizeof(long), cmp_long);
        for (long i = 0; i < n; i++) {
            expect(all[i] == i, name, "fetch-and-op values", all[i], i);
            all[i] = all32[i];
        }
        qsort(all, (size_t)n, sizeof(long), cmp_long);
        for (long i = 0; i < n; i++) {
            expect(all[i] == i, name, "fetch-and-op int values", all[i], i);
        }
        /* the values swapped out, and the one left, are 0 and every value
         * written: each exactly once */
        swp[n] = load_long(base + OFF_SWAP);
        qsort(swp, (size_t)n + 1, sizeof(long), cmp_long);
        for (long i = 0; i <= n; i++) {
            expect(swp[i] == i, name, "fetch-and-op replace values", swp[i], i);
        }
        unsigned long want = 0, got;
        for (int r = 0; r < nranks; r++) {
            want |= 1ul << (r % 64);
        }
        memcpy(&got, base + OFF_BITS, sizeof(got));
        expect(got == want, name, "fetch-and-op bor", (long)got, (long)want);
        int c32;
        memcpy(&c32, base + OFF_COUNT32, sizeof(c32));
        expect(load_long(base + OFF_COUNTER) == n, name, "fetch-and-op total",
               load_long(base + OFF_COUNTER), n);
        expect(c32 == n, name, "fetch-and-op int total", c32, n);
        long cas_total = no_cas ? 0 : (long)ROUNDS * (nranks - 1);
        expect(load_long(base + OFF_CAS) == cas_total, name, "compare-and-swap total",
               load_long(base + OFF_CAS), cas_total);
        /* which rank swapped last is not determined: out of the digest */
        memset(base + OFF_SWAP, 0, 8);
    }
    memset(base + OFF_CAS_SELF, 0, 8); /* present with "self" only */
    free(all);
    free(all32);
    free(swp);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* FNV-1a of every rank's window, in rank order (rank 0's result). */
static uint64_t window_digest(const unsigned char *base)
{
    unsigned char *all = rank == 0 ? malloc((size_t)WIN_BYTES * nranks) : NULL;
    uint64_t       h   = 1469598103934665603ull;

    MPI_Gather(base, WIN_BYTES, MPI_BYTE, all, WIN_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        h = fnv(h, all, (size_t)WIN_BYTES * nranks);
        free(all);
    }
    return h;
}

static uint64_t suite(MPI_Win win, unsigned char *base, const char *name)
{
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;

    memset(base, 0, WIN_BYTES);
    MPI_Barrier(MPI_COMM_WORLD);
    fence_section(win, base, name, right, left);
    pscw_section(win, base, name, right, left);
    passive_section(win, base, name, right);
    MPI_Win_fence(0, win);
    return window_digest(base);
}

int main(int argc, char **argv)
{
    unsigned char *base, *created;
    MPI_Win        win, cwin;
    uint64_t       digest;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i < argc; i++) {
        self_cas |= strcmp(argv[i], "self") == 0;
        no_cas |= strcmp(argv[i], "no-cas") == 0;
        no_umax |= strcmp(argv[i], "no-umax") == 0;
    }
    self_cas &= !no_cas;

    MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    digest = suite(win, base, "allocate");
    MPI_Win_free(&win);

    created = malloc(WIN_BYTES);
    MPI_Win_create(created, WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &cwin);
    digest = fnv(digest, (const unsigned char *)&(uint64_t){suite(cwin, created, "create")}, 8);
    MPI_Win_free(&cwin);
    free(created);

    long sum = 0;
    MPI_Reduce(&errors, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("rma-check: %d ranks, %ld errors, digest %016llx\n", nranks, sum,
               (unsigned long long)digest);
    }
    MPI_Finalize();
    return (rank == 0 && sum != 0) ? 1 : 0;
}
