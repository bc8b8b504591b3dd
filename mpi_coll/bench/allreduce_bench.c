/*
 * MPI_Allreduce latency and bandwidth, 8 B .. max bytes of doubles
 * (MPI_SUM). Two communicators in the same run: one duplicated plainly (the
 * coll component the run selects, doorbell when its priority is raised) and
 * one duplicated with the info key doorbell_coll=off (the stock choice:
 * tuned, or han where han accepts the communicator). For each size the two
 * are timed in alternating batches, so a change in machine load hits both.
 * One line per size:
 *   <bytes> <lat_us A> <lat_us B> <busbw A> <busbw B>
 * algbw = bytes / time; busbw = algbw * 2(n-1)/n (NCCL's convention).
 * Latency is the slowest rank's average.
 * Usage: doorbell-allreduce-bench [max_bytes] [seconds_per_size]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *sbuf, *rbuf;

/* Average seconds per allreduce over `iters`, slowest rank. */
static double timed(MPI_Comm comm, int count, int iters)
{
    double t0, t, tmax;
    int i;

    MPI_Barrier(comm);
    t0 = MPI_Wtime();
    for (i = 0; i < iters; i++) {
        MPI_Allreduce(sbuf, rbuf, count, MPI_DOUBLE, MPI_SUM, comm);
    }
    t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    return tmax;
}

int main(int argc, char **argv)
{
    size_t max_bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 16u << 20;
    double budget = argc > 2 ? atof(argv[2]) : 0.2;
    MPI_Comm comm[2];
    MPI_Info info;
    int me, n, i, c;
    size_t bytes;

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
    if (me == 0) {
        printf("# ranks %d; A = selected component, B = info doorbell_coll=off\n"
               "# bytes lat_us_A lat_us_B busbw_GBps_A busbw_GBps_B\n", n);
    }
    for (bytes = 8; bytes <= max_bytes; bytes *= 2) {
        int count = (int)(bytes / sizeof(double)), iters, batch;
        double probe = 0, t[2] = {0, 0};

        /* Warm up both (the first call sets up a communicator's
         * resources), size the loop from a probe, then alternate. */
        for (c = 0; c < 2; c++) {
            timed(comm[c], count, 2);
            probe += timed(comm[c], count, 1);
        }
        iters = (int)(budget / (probe > 1e-7 ? probe : 1e-7));
        iters = iters < 4 ? 4 : iters > 20000 ? 20000 : iters;
        batch = iters / 4 > 0 ? iters / 4 : 1;
        for (i = 0; i < 4; i++) {
            for (c = 0; c < 2; c++) {
                t[c] += timed(comm[c], count, batch) / 4;
            }
        }
        if (me == 0) {
            double f = 2.0 * (n - 1) / n / 1e9;
            printf("%zu %.2f %.2f %.4f %.4f\n", bytes, t[0] * 1e6, t[1] * 1e6,
                   (double)bytes / t[0] * f, (double)bytes / t[1] * f);
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
