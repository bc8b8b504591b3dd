/*
 * MPI_Allreduce latency and bandwidth, 8 B .. 16 MiB of doubles (MPI_SUM),
 * whatever coll component the run selects. One line per size:
 *   <bytes> <avg latency us> <algbw GB/s> <busbw GB/s>
 * algbw = bytes / time; busbw = algbw * 2(n-1)/n (NCCL's convention: the
 * bytes each rank's link carries in a bandwidth-optimal allreduce).
 * Latency is the slowest rank's average over the timed iterations.
 * Usage: doorbell-allreduce-bench [max_bytes] [seconds_per_size]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    size_t max_bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 16u << 20;
    double budget = argc > 2 ? atof(argv[2]) : 0.2;
    int me, n, i;
    size_t bytes;
    double *sbuf, *rbuf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    sbuf = malloc(max_bytes);
    rbuf = malloc(max_bytes);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "out of memory for %zu bytes\n", max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (i = 0; i < (int)(max_bytes / sizeof(double)); i++) {
        sbuf[i] = (double)(me + i % 7);
    }
    if (me == 0) {
        printf("# ranks %d\n# bytes lat_us algbw_GBps busbw_GBps\n", n);
    }
    for (bytes = 8; bytes <= max_bytes; bytes *= 2) {
        int count = (int)(bytes / sizeof(double)), iters = 0, warm;
        double t0, t, tmax, probe;

        /* Warm up (first use also sets up the communicator's resources),
         * then size the timed loop to the budget from a short probe. */
        for (warm = 0; warm < 3; warm++) {
            MPI_Allreduce(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        MPI_Allreduce(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        probe = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &probe, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        iters = (int)(budget / (probe > 1e-7 ? probe : 1e-7));
        iters = iters < 5 ? 5 : iters > 20000 ? 20000 : iters;

        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (i = 0; i < iters; i++) {
            MPI_Allreduce(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
        t = (MPI_Wtime() - t0) / iters;
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (me == 0) {
            double algbw = (double)bytes / tmax / 1e9;
            printf("%zu %.2f %.4f %.4f\n", bytes, tmax * 1e6, algbw,
                   algbw * 2.0 * (n - 1) / n);
            fflush(stdout);
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
