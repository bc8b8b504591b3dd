/*
 * MPI_Allreduce latency and bandwidth, 8 B .. max bytes of doubles
 * (MPI_SUM). Two communicators in the same run: one duplicated plainly (the
 * coll component the run selects, doorbell when its priority is raised) and
 * one duplicated with the info key doorbell_coll=off (the stock choice:
 * tuned, or han where han accepts the communicator).
 *
 * Method:
 *   - once per job: 10 alternating batches of 100 8-byte calls on each
 *     communicator, so that the first size is not timed while the job is
 *     still starting up (the first call also sets up each side's resources);
 * then per size:
 *   - warm-up: a few calls on each communicator, then a probe that sizes the
 *     batches;
 *   - `reps` repetitions; each times one batch on each communicator, in
 *     alternating order (A then B, then B then A), so a change in machine
 *     load hits both and neither always runs first;
 *   - a batch's time is the slowest rank's average per call;
 *   - reported: the median and the minimum over the repetitions.
 * One line per size:
 *   <bytes> <median_us A> <median_us B> <min_us A> <min_us B>
 *   <busbw A> <busbw B>
 * busbw (GB/s) = algbw * 2(n-1)/n (NCCL's convention), from the medians.
 * Usage: doorbell-allreduce-bench [max_bytes] [seconds_per_size] [reps]
 *                                  [min_bytes]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_MAX_REPS 101

static double *sbuf, *rbuf;

/* Average seconds per allreduce over `iters`, slowest rank. */
static double timed(MPI_Comm comm, int count, int iters)
{
    double t0, t, tmax;
    int    i;

    MPI_Barrier(comm);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        MPI_Allreduce(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, comm);
    }
    t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    size_t   max_bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 16u << 20;
    double   budget    = argc > 2 ? atof(argv[2]) : 0.2;
    int      reps      = argc > 3 ? atoi(argv[3]) : 15;
    size_t   min_bytes = argc > 4 ? strtoull(argv[4], NULL, 0) : 8;
    double   t[2][BENCH_MAX_REPS];
    MPI_Comm comm[2];
    MPI_Info info;
    int      me, n, i, c;
    size_t   bytes;

    if (reps < 1 || reps > BENCH_MAX_REPS || min_bytes < sizeof(double)) {
        fprintf(stderr, "reps must be 1..%d, min_bytes at least %zu\n", BENCH_MAX_REPS,
                sizeof(double));
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm[0]);
    MPI_Info_create(&info);
    MPI_Info_set(info, "doorbell_coll", "off");
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm[1]);
    MPI_Info_free(&info);
    sbuf = malloc(max_bytes);
    rbuf = malloc(max_bytes);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "out of memory for %zu bytes\n", max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (i = 0; i < (int)(max_bytes / sizeof(double)); i++) {
        sbuf[i] = (double)(me + i % 7);
    }
    memset(rbuf, 0, max_bytes); /* fault the pages in before timing */
    if (me == 0) {
        printf("# ranks %d; A = selected component, B = info doorbell_coll=off;"
               " %d repetitions per size, %.3f s per size and communicator\n"
               "# bytes med_us_A med_us_B min_us_A min_us_B busbw_GBps_A"
               " busbw_GBps_B\n",
               n, reps, budget);
    }
    for (i = 0; i < 10; i++) {
        for (c = 0; c < 2; c++) {
            timed(comm[(c + i) % 2], 1, 100);
        }
    }
    for (bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        int    count = (int)(bytes / sizeof(double)), iters, r, first;
        double probe = 0, med[2], lo[2];

        for (c = 0; c < 2; c++) {
            timed(comm[c], count, 3);
        }
        for (c = 0; c < 2; c++) {
            probe += timed(comm[c], count, 2) / 2;
        }
        /* timed() returns the slowest rank's time on every rank, so all
         * ranks size the batches alike. */
        iters = (int)(budget / reps / (probe > 1e-7 ? probe : 1e-7));
        iters = iters < 1 ? 1 : iters > 5000 ? 5000 : iters;
        for (r = 0; r < reps; r++) {
            first = r % 2;
            for (c = 0; c < 2; c++) {
                int which = c ^ first;

                t[which][r] = timed(comm[which], count, iters);
            }
        }
        for (c = 0; c < 2; c++) {
            med[c] = median(t[c], reps); /* sorts: t[c][0] is the minimum */
            lo[c]  = t[c][0];
        }
        if (me == 0) {
            double f = 2.0 * (n - 1) / n / 1e9;

            printf("%zu %.2f %.2f %.2f %.2f %.4f %.4f\n", bytes, med[0] * 1e6, med[1] * 1e6,
                   lo[0] * 1e6, lo[1] * 1e6, (double)bytes / med[0] * f,
                   (double)bytes / med[1] * f);
            fflush(stdout);
        }
    }
    MPI_Comm_free(&comm[0]);
    MPI_Comm_free(&comm[1]);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
