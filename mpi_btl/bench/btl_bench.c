/*
 * doorbell-btl-bench: point-to-point latency and bandwidth between ranks 0
 * and 1, 8 B to 1 MiB, each figure the median over its iterations, so that a
 * rank descheduled for a scheduler tick on a shared host moves a tail, not
 * the figure (a mean over the same run moves by tens of microseconds).
 *
 * Output, one line per size (CSV):
 *   latency,<bytes>,<median us one way>,<p10>,<p90>     ping-pong, RTT/2
 *   bandwidth,<bytes>,<median MB/s>,<p10>,<p90>         a window of 16
 *       non-blocking sends answered by one 1-byte message, per window
 *
 *   doorbell-btl-bench [--min B] [--max B] [--iters N] [--only latency|bandwidth]
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 16

static int rank;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, size_t bytes, double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    printf("%s,%zu,%.3f,%.3f,%.3f\n", what, bytes, v[n / 2], v[n / 10], v[n - 1 - n / 10]);
    fflush(stdout);
}

static double one_pingpong(char *buf, size_t len)
{
    double t0 = MPI_Wtime();

    if (rank == 0) {
        MPI_Send(buf, (int)len, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)len, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Recv(buf, (int)len, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)len, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    }
    return (MPI_Wtime() - t0) * 1e6 / 2;
}

static double one_window(char *buf, size_t len)
{
    MPI_Request req[WINDOW];
    char        ack = 0;
    double      t0  = MPI_Wtime();

    if (rank == 0) {
        for (int w = 0; w < WINDOW; w++) {
            MPI_Isend(buf + (size_t)w * len, (int)len, MPI_CHAR, 1, 2, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        MPI_Recv(&ack, 1, MPI_CHAR, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        for (int w = 0; w < WINDOW; w++) {
            MPI_Irecv(buf + (size_t)w * len, (int)len, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
        MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
    }
    return (double)len * WINDOW / ((MPI_Wtime() - t0) * 1e6); /* MB/s */
}

int main(int argc, char **argv)
{
    size_t      min = 8, max = 1 << 20;
    int         iters = 1000, nranks;
    const char *only  = NULL;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--min") == 0) {
            min = strtoull(argv[i + 1], NULL, 0);
        } else if (strcmp(argv[i], "--max") == 0) {
            max = strtoull(argv[i + 1], NULL, 0);
        } else if (strcmp(argv[i], "--iters") == 0) {
            iters = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--only") == 0) {
            only = argv[i + 1];
        }
    }
    if (nranks < 2 || min < 1 || max < min || max > (1u << 26) || iters < 10) {
        if (rank == 0) {
            fprintf(stderr,
                    "usage: %s [--min B] [--max B] [--iters N>=10] "
                    "[--only latency|bandwidth] (2 ranks or more)\n",
                    argv[0]);
        }
        MPI_Finalize();
        return 2;
    }

    char   *buf = malloc(max * WINDOW);
    double *t   = malloc(sizeof(double) * (size_t)iters);
    memset(buf, 1, max * WINDOW);
    for (size_t len = min; len <= max; len *= 2) {
        /* fewer iterations for large messages: the same time per size */
        int n = len > 65536 ? iters / 4 : iters;
        n     = n < 10 ? 10 : n;
        if (only == NULL || strcmp(only, "latency") == 0) {
            for (int w = 0; w < 10; w++) {
                one_pingpong(buf, len);
            }
            for (int i = 0; i < n; i++) {
                t[i] = one_pingpong(buf, len);
            }
            if (rank == 0) {
                report("latency", len, t, n);
            }
        }
        if (only == NULL || strcmp(only, "bandwidth") == 0) {
            int m = n / 4 < 10 ? 10 : n / 4;
            for (int w = 0; w < 3; w++) {
                one_window(buf, len);
            }
            for (int i = 0; i < m; i++) {
                t[i] = one_window(buf, len);
            }
            if (rank == 0) {
                report("bandwidth", len, t, m);
            }
        }
    }
    free(t);
    free(buf);
    MPI_Finalize();
    return 0;
}
