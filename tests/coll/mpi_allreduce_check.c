/*
 * End-to-end check of MPI_Allreduce under mpirun (run by the integration
 * tests with the doorbell component selected). Every rank can compute every
 * other rank's input, so each checks its result locally:
 *   integers: exact reference (wrapping arithmetic is order-free);
 *   floats:   values exact in any order -> bitwise equal to a rank-order fold;
 *             random values -> bitwise equal on all ranks and within rounding
 *             of a rank-order fold in long double;
 * plus MPI_IN_PLACE, count 0, user ops (delegated), large vectors (several
 * rounds) and communicators created and freed in a loop.
 * Prints "CHECK OK <n> cases" on rank 0, or "CHECK FAIL ..." lines; exit 1.
 *   coll_mpi_check [loops]         all of the above
 *   coll_mpi_check 1 stall         the last rank stalls (timeouts)
 *   coll_mpi_check 1 types         every predefined op/type pair
 *   coll_mpi_check 1 kill RANK     RANK dies inside an allreduce's wait
 */
#include "allreduce_types_check.h"

#include <mpi.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures, cases;

#define FAIL(...)                           \
    do {                                    \
        int r_;                             \
        MPI_Comm_rank(MPI_COMM_WORLD, &r_); \
        printf("CHECK FAIL rank %d: ", r_); \
        printf(__VA_ARGS__);                \
        printf("\n");                       \
        failures++;                         \
    } while (0)

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Deterministic input of `rank`, element i, case seed. */
static uint64_t val(int rank, size_t i, int seed)
{
    return mix(((uint64_t)seed << 40) ^ ((uint64_t)rank << 32) ^ i);
}

/* ---- integers: int64 / int32 / uint8 with SUM, PROD, BXOR, MAX, LAND */
static int64_t ref_i64(MPI_Op op, int n, size_t i, int seed)
{
    uint64_t acc = val(0, i, seed);
    int      r;

    for (r = 1; r < n; r++) {
        uint64_t v = val(r, i, seed);
        if (op == MPI_SUM)
            acc += v;
        else if (op == MPI_PROD)
            acc *= v | 1;
        else if (op == MPI_BXOR)
            acc ^= v;
        else if (op == MPI_MAX)
            acc = (int64_t)v > (int64_t)acc ? v : acc;
    }
    return (int64_t)acc;
}

static void check_int64(MPI_Comm comm, MPI_Op op, size_t count, int in_place, int seed)
{
    int      me, n;
    size_t   i;
    int64_t *s, *r;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    s = malloc((count + 1) * sizeof(*s));
    r = malloc((count + 1) * sizeof(*r));
    for (i = 0; i < count; i++) {
        uint64_t v = val(me, i, seed);
        s[i]       = (int64_t)(op == MPI_PROD && me > 0 ? (v | 1) : v);
        r[i]       = s[i];
    }
    if (op == MPI_PROD) { /* rank 0's value too, as in ref_i64 */
        for (i = 0; i < count; i++) {
            if (me == 0)
                s[i] = r[i] = (int64_t)val(0, i, seed);
        }
    }
    MPI_Allreduce(in_place ? MPI_IN_PLACE : s, r, (int)count, MPI_INT64_T, op, comm);
    cases++;
    for (i = 0; i < count; i++) {
        if (r[i] != ref_i64(op, n, i, seed)) {
            FAIL("int64 op %d count %zu in_place %d: element %zu = %lld, "
                 "expected %lld",
                 (int)(intptr_t)op, count, in_place, i, (long long)r[i],
                 (long long)ref_i64(op, n, i, seed));
            break;
        }
    }
    free(s);
    free(r);
}

static void check_small_ints(MPI_Comm comm, int seed)
{
    int     me, n, r;
    size_t  i, count = 1000;
    int32_t s32[1000], r32[1000];
    uint8_t s8[1000], r8[1000];
    int     land[1000];

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (i = 0; i < count; i++) {
        s32[i]  = (int32_t)val(me, i, seed);
        s8[i]   = (uint8_t)val(me, i, seed);
        land[i] = (int)(val(me, i, seed) % 5);
    }
    MPI_Allreduce(s32, r32, (int)count, MPI_INT, MPI_MIN, comm);
    MPI_Allreduce(s8, r8, (int)count, MPI_BYTE, MPI_BOR, comm);
    MPI_Allreduce(MPI_IN_PLACE, land, (int)count, MPI_INT, MPI_LAND, comm);
    cases += 3;
    for (i = 0; i < count; i++) {
        int32_t m = (int32_t)val(0, i, seed);
        uint8_t o = 0;
        int     a = 1;

        for (r = 0; r < n; r++) {
            int32_t v = (int32_t)val(r, i, seed);
            m         = v < m ? v : m;
            o |= (uint8_t)val(r, i, seed);
            a = a && (val(r, i, seed) % 5 != 0);
        }
        if (n == 1) {
            a = (int)(val(0, i, seed) % 5); /* one rank: input unchanged */
        }
        if (r32[i] != m || r8[i] != o || land[i] != a) {
            FAIL("MIN/BOR/LAND element %zu: %d/%u/%d expected %d/%u/%d", i, r32[i], r8[i], land[i],
                 m, o, a);
            break;
        }
    }
}

/* ---- floats */
static void check_double(MPI_Comm comm, size_t count, int exact, int in_place, int seed)
{
    int     me, n, r;
    size_t  i;
    double *s     = malloc((count + 1) * sizeof(double));
    double *res   = malloc((count + 1) * sizeof(double));
    double *first = malloc((count + 1) * sizeof(double));

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (i = 0; i < count; i++) {
        uint64_t v = val(me, i, seed);
        s[i]       = exact ? (double)((int)(v % 17) - 8) :
                             ldexp((double)(v >> 11) / 9007199254740992.0 - 0.5, (int)(v % 9) - 4);
        res[i]     = s[i];
    }
    MPI_Allreduce(in_place ? MPI_IN_PLACE : s, res, (int)count, MPI_DOUBLE, MPI_SUM, comm);
    cases++;
    /* The same bits everywhere: compare with rank 0's result. */
    memcpy(first, res, count * sizeof(double));
    MPI_Bcast(first, (int)count, MPI_DOUBLE, 0, comm);
    if (memcmp(first, res, count * sizeof(double)) != 0) {
        FAIL("double count %zu: result differs from rank 0's bits", count);
    }
    for (i = 0; i < count; i++) {
        long double ref = 0, mag = 0;
        for (r = 0; r < n; r++) {
            uint64_t v = val(r, i, seed);
            double   x = exact ?
                             (double)((int)(v % 17) - 8) :
                             ldexp((double)(v >> 11) / 9007199254740992.0 - 0.5, (int)(v % 9) - 4);
            ref += x;
            mag += fabs(x);
        }
        if (exact ? res[i] != (double)ref : fabsl(res[i] - ref) > mag * n * 2.3e-16L) {
            FAIL("double count %zu exact %d: element %zu = %.17g, expected %.17Lg", count, exact, i,
                 res[i], ref);
            break;
        }
    }
    free(s);
    free(res);
    free(first);
}

static void check_minloc(MPI_Comm comm, int seed)
{
    struct {
        double v;
        int    k;
    } s[64], r[64];
    int    me, n, rr;
    size_t i;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    for (i = 0; i < 64; i++) {
        s[i].v = (double)(val(me, i, seed) % 3);
        s[i].k = me;
    }
    MPI_Allreduce(s, r, 64, MPI_DOUBLE_INT, MPI_MINLOC, comm);
    cases++;
    for (i = 0; i < 64; i++) {
        double best = 1e300;
        int    k    = -1;
        for (rr = 0; rr < n; rr++) {
            double v = (double)(val(rr, i, seed) % 3);
            if (v < best) {
                best = v;
                k    = rr;
            }
        }
        if (r[i].v != best || r[i].k != k) {
            FAIL("MINLOC element %zu: (%g,%d) expected (%g,%d)", i, r[i].v, r[i].k, best, k);
            break;
        }
    }
}

static void user_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int i;
    (void)dt;
    for (i = 0; i < *len; i++) {
        ((int *)inout)[i] += ((int *)in)[i];
    }
}

static void check_user_op(MPI_Comm comm)
{
    MPI_Op op;
    int    me, n, x, y;

    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    MPI_Op_create(user_sum, 1, &op);
    x = me + 1;
    MPI_Allreduce(&x, &y, 1, MPI_INT, op, comm);
    MPI_Op_free(&op);
    cases++;
    if (y != n * (n + 1) / 2) {
        FAIL("user op: %d expected %d", y, n * (n + 1) / 2);
    }
}

static void run_all(MPI_Comm comm, int seed, int big)
{
    static const size_t counts[] = {0, 1, 3, 7, 100, 1025, 4099};
    size_t              c;

    for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        check_int64(comm, MPI_SUM, counts[c], (int)(c % 2), seed + (int)c);
        check_int64(comm, MPI_BXOR, counts[c], (int)(c % 2 == 0), seed + (int)c);
        check_double(comm, counts[c], 1, (int)(c % 2), seed + (int)c);
        check_double(comm, counts[c], 0, (int)(c % 2 == 0), seed + (int)c);
    }
    check_int64(comm, MPI_PROD, 333, 0, seed);
    check_int64(comm, MPI_MAX, 333, 1, seed);
    check_small_ints(comm, seed);
    check_minloc(comm, seed);
    check_user_op(comm);
    if (big) {
        /* Several rounds through the scratch, every large algorithm. */
        check_int64(comm, MPI_SUM, 1 << 20, 0, seed + 99);
        check_double(comm, (1 << 19) + 3, 0, 1, seed + 98);
    }
}

/* A peer that stalls: the last rank enters the allreduce long after the
 * others; with a short coll_doorbell_timeout they must get an MPI error back
 * (MPI_ERRORS_RETURN) instead of waiting. Prints "STALL rank <r> class <c>". */
static int stall(void)
{
    int    me, n, rc, cls;
    double x = 1, y = 0;

    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* set up */
    if (me == n - 1) {
        sleep(3);
    }
    rc = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    printf("STALL rank %d class %d (MPI_ERR_OTHER is %d)\n", me, cls, MPI_ERR_OTHER);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

/* A rank that dies: `victim` is killed (SIGKILL) after the others' teams
 * are set up; the others' next allreduces, small on one communicator and
 * large on another, must return an error (MPI_ERRORS_RETURN) within
 * coll_doorbell_timeout instead of waiting. Each survivor prints "KILL rank
 * <r> small class <c> <s> s large class <c> <s> s"; once all have, they
 * end as the victim did (MPI_Finalize would wait for it, and under
 * --enable-recovery MPI_Abort leaves mpirun waiting). */
static int kill_one(int victim)
{
    int      me, cls[2], rc;
    double   t[2], x = 1, y = 0, *big, *big_out;
    size_t   big_count = 1 << 17; /* 1 MiB */
    MPI_Comm dup, alive;

    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    MPI_Comm_split(MPI_COMM_WORLD, me == victim ? MPI_UNDEFINED : 0, me, &alive);
    big     = calloc(big_count, sizeof(double));
    big_out = calloc(big_count, sizeof(double));
    /* Set up both teams, then line up. */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(big, big_out, (int)big_count, MPI_DOUBLE, MPI_SUM, dup);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == victim) {
        raise(SIGKILL);
    }
    t[0] = MPI_Wtime();
    rc   = MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls[0]);
    t[0] = MPI_Wtime() - t[0];
    t[1] = MPI_Wtime();
    rc   = MPI_Allreduce(big, big_out, (int)big_count, MPI_DOUBLE, MPI_SUM, dup);
    MPI_Error_class(rc, &cls[1]);
    t[1] = MPI_Wtime() - t[1];
    printf("KILL rank %d small class %d %.2f s large class %d %.2f s (MPI_ERR_OTHER is %d)\n", me,
           cls[0], t[0], cls[1], t[1], MPI_ERR_OTHER);
    fflush(stdout);
    /* The survivors alone (point-to-point among them): all have printed. */
    MPI_Barrier(alive);
    raise(SIGKILL);
    return 0;
}

/* Every predefined op/type pair (allreduce_types_check.c): counts of 1, 13
 * and 3000 elements (sizes around and above the slices of a hierarchy).
 * Prints "TYPES OK <cases> cases on <n> ranks". */
static int types(void)
{
    static const size_t counts[] = {1, 13, 3000};
    int                 me, n, mine, total_cases, fails, total_fails;

    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    fails = check_every_type(MPI_COMM_WORLD, counts, 3, 77, &mine);
    MPI_Reduce(&mine, &total_cases, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&fails, &total_fails, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        if (total_fails == 0) {
            printf("TYPES OK %d cases on %d ranks, digest %016llx\n", total_cases, n,
                   (unsigned long long)every_type_digest());
        } else {
            printf("TYPES FAILED %d results\n", total_fails);
        }
    }
    fflush(stdout);
    MPI_Finalize();
    return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
    int me, i, loops = argc > 1 ? atoi(argv[1]) : 20, total_cases, total_fail;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc > 2 && strcmp(argv[2], "stall") == 0) {
        return stall();
    }
    if (argc > 2 && strcmp(argv[2], "types") == 0) {
        return types();
    }
    if (argc > 3 && strcmp(argv[2], "kill") == 0) {
        return kill_one(atoi(argv[3]));
    }

    run_all(MPI_COMM_WORLD, 1, 1);
    /* Communicators created and freed in a loop. */
    for (i = 0; i < loops; i++) {
        MPI_Comm dup, split;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &split);
        check_int64(dup, MPI_SUM, 100 + i, i % 2, 1000 + i);
        check_double(split, 50 + i, 0, 0, 2000 + i);
        check_small_ints(split, 3000 + i);
        MPI_Comm_free(&split);
        MPI_Comm_free(&dup);
    }
    MPI_Reduce(&cases, &total_cases, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&failures, &total_fail, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (me == 0) {
        if (total_fail == 0) {
            printf("CHECK OK %d cases\n", total_cases);
        } else {
            printf("CHECK FAILED %d of %d cases\n", total_fail, total_cases);
        }
    }
    MPI_Finalize();
    return failures ? 1 : 0;
}
