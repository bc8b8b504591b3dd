/*
 * doorbell-rma-check: one-sided MPI, every result checked.
 *   fence epochs      MPI_Put to the right neighbour, MPI_Get from the left
 *                     one (8 B and 1 MiB), MPI_Accumulate (MPI_SUM) of every
 *                     rank into rank 0
 *   passive target    MPI_Win_lock/flush/unlock: put then get back the same
 *                     bytes; MPI_Fetch_and_op (MPI_SUM) on one counter from
 *                     every rank (every fetched value distinct, the total
 *                     exact); MPI_Compare_and_swap increments of one word
 *                     (exactly ranks x rounds successes)
 * Output (rank 0): "rma-check: <n> ranks, <e> errors"; exit status 1 on any
 * error.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG    (1 << 20) /* bytes of the large put/get */
#define ROUNDS 50        /* fetch-and-op and compare-and-swap rounds */

static int  rank, nranks;
static long errors;

static void expect(int ok, const char *what, long a, long b)
{
    if (!ok) {
        printf("rank %d: %s: got %ld, expected %ld\n", rank, what, a, b);
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
    OFF_SMALL   = 0,    /* 8 B written by the left neighbour */
    OFF_ACC     = 64,   /* long, MPI_SUM of every rank (rank 0) */
    OFF_COUNTER = 128,  /* long, fetch-and-op counter (rank 0) */
    OFF_CAS     = 192,  /* long, compare-and-swap word (rank 0) */
    OFF_PASSIVE = 256,  /* 64 B, passive-target put/get */
    OFF_BIG     = 4096, /* BIG bytes written by the left neighbour */
    WIN_BYTES   = 4096 + BIG
};

static unsigned char pattern(int from, size_t i)
{
    return (unsigned char)((size_t)from * 37u + i * 11u + 5u);
}

int main(int argc, char **argv)
{
    unsigned char *base, *big;
    MPI_Win        win;
    int            right, left;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    right = (rank + 1) % nranks;
    left  = (rank + nranks - 1) % nranks;

    MPI_Win_allocate(WIN_BYTES, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    memset(base, 0, WIN_BYTES);
    big = malloc(BIG);
    for (size_t i = 0; i < BIG; i++) {
        big[i] = pattern(rank, i);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* fence: put 8 B and 1 MiB to the right, accumulate into rank 0 */
    uint64_t small = 0x0123456789abcdefull ^ (uint64_t)rank;
    long     one   = rank + 1;
    MPI_Win_fence(0, win);
    MPI_Put(&small, 8, MPI_BYTE, right, OFF_SMALL, 8, MPI_BYTE, win);
    MPI_Put(big, BIG, MPI_BYTE, right, OFF_BIG, BIG, MPI_BYTE, win);
    MPI_Accumulate(&one, 1, MPI_LONG, 0, OFF_ACC, 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_fence(0, win);
    uint64_t got_small;
    memcpy(&got_small, base + OFF_SMALL, 8);
    expect(got_small == (0x0123456789abcdefull ^ (uint64_t)left), "put 8 B", (long)got_small,
           (long)(0x0123456789abcdefull ^ (uint64_t)left));
    long bad = 0;
    for (size_t i = 0; i < BIG; i++) {
        bad += base[OFF_BIG + i] != pattern(left, i);
    }
    expect(bad == 0, "put 1 MiB, wrong bytes", bad, 0);
    if (rank == 0) {
        long acc;
        memcpy(&acc, base + OFF_ACC, sizeof(acc));
        expect(acc == (long)nranks * (nranks + 1) / 2, "accumulate", acc,
               (long)nranks * (nranks + 1) / 2);
    }

    /* fence: get back what the left neighbour holds (our own data) */
    unsigned char *back = malloc(BIG);
    uint64_t       back_small;
    MPI_Win_fence(0, win);
    MPI_Get(&back_small, 8, MPI_BYTE, right, OFF_SMALL, 8, MPI_BYTE, win);
    MPI_Get(back, BIG, MPI_BYTE, right, OFF_BIG, BIG, MPI_BYTE, win);
    MPI_Win_fence(0, win);
    expect(back_small == small, "get 8 B", (long)back_small, (long)small);
    expect(memcmp(back, big, BIG) == 0, "get 1 MiB equal", 0, 1);
    free(back);

    /* passive target: put, flush, get the same bytes back */
    unsigned char mine[64], again[64];
    for (int i = 0; i < 64; i++) {
        mine[i] = pattern(rank + 100, (size_t)i);
    }
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Put(mine, 64, MPI_BYTE, right, OFF_PASSIVE, 64, MPI_BYTE, win);
    MPI_Win_flush(right, win);
    MPI_Get(again, 64, MPI_BYTE, right, OFF_PASSIVE, 64, MPI_BYTE, win);
    MPI_Win_unlock(right, win);
    expect(memcmp(mine, again, 64) == 0, "lock/put/flush/get", 0, 1);

    /* fetch-and-op: every fetched value is distinct, the total exact */
    long fetched[ROUNDS], inc = 1;
    MPI_Win_lock_all(0, win);
    for (int r = 0; r < ROUNDS; r++) {
        MPI_Fetch_and_op(&inc, &fetched[r], MPI_LONG, 0, OFF_COUNTER, MPI_SUM, win);
        MPI_Win_flush(0, win);
    }
    MPI_Win_unlock_all(win);

    /* compare-and-swap: each success moves the word by exactly one */
    long successes = 0, tries = 0;
    MPI_Win_lock_all(0, win);
    while (successes < ROUNDS && tries < 1000000) {
        long seen, expected = 0, next;
        MPI_Fetch_and_op(NULL, &expected, MPI_LONG, 0, OFF_CAS, MPI_NO_OP, win);
        MPI_Win_flush(0, win);
        next = expected + 1;
        MPI_Compare_and_swap(&next, &expected, &seen, MPI_LONG, 0, OFF_CAS, win);
        MPI_Win_flush(0, win);
        successes += seen == expected;
        tries++;
    }
    MPI_Win_unlock_all(win);
    expect(successes == ROUNDS, "compare-and-swap successes", successes, ROUNDS);
    MPI_Barrier(MPI_COMM_WORLD);

    long *all = rank == 0 ? malloc(sizeof(long) * ROUNDS * (size_t)nranks) : NULL;
    MPI_Gather(fetched, ROUNDS, MPI_LONG, all, ROUNDS, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long counter, cas, n = (long)ROUNDS * nranks;
        qsort(all, (size_t)n, sizeof(long), cmp_long);
        for (long i = 0; i < n; i++) {
            expect(all[i] == i, "fetch-and-op values", all[i], i);
        }
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        MPI_Get(&counter, 1, MPI_LONG, 0, OFF_COUNTER, 1, MPI_LONG, win);
        MPI_Get(&cas, 1, MPI_LONG, 0, OFF_CAS, 1, MPI_LONG, win);
        MPI_Win_unlock(0, win);
        expect(counter == n, "fetch-and-op total", counter, n);
        expect(cas == n, "compare-and-swap total", cas, n);
        free(all);
    }

    long sum = 0;
    MPI_Reduce(&errors, &sum, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("rma-check: %d ranks, %ld errors\n", nranks, sum);
    }
    MPI_Win_free(&win);
    free(big);
    MPI_Finalize();
    return (rank == 0 && sum != 0) ? 1 : 0;
}
