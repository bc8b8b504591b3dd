/*
 * doorbell-mpi-bench: point-to-point latency and bandwidth between the first
 * and the last rank, and MPI_Allreduce over all ranks, 8 B to 1 MiB.
 *
 * Output, one line per measurement (CSV, for scripts/report):
 *   latency,<bytes>,<us one way>        ping-pong, half the round trip
 *   bandwidth,<bytes>,<MB/s>            window of non-blocking sends, one ack
 *   allreduce,<bytes>,<us per call>     MPI_DOUBLE sum, bytes/8 elements
 * Progress goes to stderr. The number of iterations of each size is chosen
 * from a timed warm-up so that a size takes about --budget-ms on any network
 * (loopback or a 200 Mb/s spine).
 *
 *   doorbell-mpi-bench [--min B] [--max B] [--budget-ms MS] [--only latency|bandwidth|allreduce]
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_WINDOW    16 /* messages in flight per bandwidth round */
#define BENCH_MIN_ITERS 3
#define BENCH_MAX_ITERS 2000

struct bench_opts {
    size_t      min_bytes;
    size_t      max_bytes;
    double      budget_s; /* seconds per size and benchmark */
    const char *only;     /* NULL: all */
};

static int rank, nranks, peer;

/* Waits for a request sleeping between polls: the ranks that sit out a
 * point-to-point test (and every rank between tests) must not take CPU time
 * from the two that are measured; the host may have fewer cores than ranks. */
static void bench_wait(MPI_Request *req)
{
    const struct timespec nap  = {0, 20000}; /* 20 us */
    int                   done = 0;

    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        nanosleep(&nap, NULL);
    }
}

static void bench_barrier(void)
{
    MPI_Request req;

    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    bench_wait(&req);
}

/* Rank 0 decides the iteration count from one timed warm-up iteration. */
static int bench_iters(double warmup_s, const struct bench_opts *o)
{
    int iters = 0;

    if (rank == 0) {
        double n = warmup_s > 0 ? o->budget_s / warmup_s : BENCH_MAX_ITERS;
        iters    = n < BENCH_MIN_ITERS ? BENCH_MIN_ITERS :
                   n > BENCH_MAX_ITERS ? BENCH_MAX_ITERS :
                                         (int)n;
    }
    MPI_Request req;
    MPI_Ibcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
    bench_wait(&req);
    return iters;
}

static void pingpong(char *buf, size_t len, int iters)
{
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, (int)len, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)len, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == peer) {
            MPI_Recv(buf, (int)len, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)len, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
        }
    }
}

static void stream(char *buf, size_t len, int iters)
{
    MPI_Request req[BENCH_WINDOW];
    char        ack = 0;

    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            for (int w = 0; w < BENCH_WINDOW; w++)
                MPI_Isend(buf + (size_t)w * len, (int)len, MPI_CHAR, peer, 2, MPI_COMM_WORLD,
                          &req[w]);
            MPI_Waitall(BENCH_WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == peer) {
            for (int w = 0; w < BENCH_WINDOW; w++)
                MPI_Irecv(buf + (size_t)w * len, (int)len, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &req[w]);
            MPI_Waitall(BENCH_WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_CHAR, 0, 3, MPI_COMM_WORLD);
        }
    }
}

static void allreduce(double *in, double *out, size_t count, int iters)
{
    for (int i = 0; i < iters; i++)
        MPI_Allreduce(in, out, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* Runs the call once untimed, once timed to choose the count, then times
 * the chosen count; returns seconds per call. */
#define BENCH_TIMED(call_with_iters, o, out_iters)                              \
    ({                                                                          \
        double t0_, t1_;                                                        \
        int    n_ = 1;                                                          \
        call_with_iters; /* untimed: buffers, registrations, protocol switch */ \
        bench_barrier();                                                        \
        t0_ = MPI_Wtime();                                                      \
        call_with_iters;                                                        \
        t1_ = MPI_Wtime();                                                      \
        n_  = bench_iters(t1_ - t0_, o);                                        \
        bench_barrier();                                                        \
        t0_ = MPI_Wtime();                                                      \
        for (int r_ = 0; r_ < n_; r_++) {                                       \
            call_with_iters;                                                    \
        }                                                                       \
        t1_         = MPI_Wtime();                                              \
        (out_iters) = n_;                                                       \
        (t1_ - t0_) / n_;                                                       \
    })

static int wants(const struct bench_opts *o, const char *what)
{
    return o->only == NULL || strcmp(o->only, what) == 0;
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
    o->min_bytes = 8;
    o->max_bytes = 1 << 20;
    o->budget_s  = 0.05;
    o->only      = NULL;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--min") == 0) {
            o->min_bytes = strtoull(argv[++i], NULL, 0);
        } else if (i + 1 < argc && strcmp(argv[i], "--max") == 0) {
            o->max_bytes = strtoull(argv[++i], NULL, 0);
        } else if (i + 1 < argc && strcmp(argv[i], "--budget-ms") == 0) {
            o->budget_s = strtod(argv[++i], NULL) / 1000.0;
        } else if (i + 1 < argc && strcmp(argv[i], "--only") == 0) {
            o->only = argv[++i];
        } else {
            if (rank == 0)
                fprintf(stderr,
                        "usage: %s [--min B] [--max B] [--budget-ms MS] "
                        "[--only latency|bandwidth|allreduce]\n",
                        argv[0]);
            return -1;
        }
    }
    if (o->min_bytes < 1 || o->max_bytes < o->min_bytes || o->max_bytes > (1u << 26) ||
        o->budget_s <= 0) {
        if (rank == 0)
            fprintf(stderr, "%s: need 1 <= --min <= --max <= 64 MiB and --budget-ms > 0\n",
                    argv[0]);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    char             *buf;
    double           *in, *out;
    int               iters;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    peer = nranks - 1;
    if (parse_opts(argc, argv, &o) != 0 || nranks < 2) {
        if (rank == 0 && nranks < 2)
            fprintf(stderr, "%s: needs at least 2 ranks\n", argv[0]);
        MPI_Finalize();
        return 2;
    }

    buf = malloc(o.max_bytes * BENCH_WINDOW);
    in  = malloc(o.max_bytes + sizeof(double));
    out = malloc(o.max_bytes + sizeof(double));
    if (!buf || !in || !out) {
        fprintf(stderr, "rank %d: out of memory for %zu-byte buffers\n", rank, o.max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, rank + 1, o.max_bytes * BENCH_WINDOW);
    for (size_t i = 0; i < o.max_bytes / sizeof(double) + 1; i++)
        in[i] = rank + 1;

    /* Connections are made lazily: make them all before anything is timed. */
    for (int i = 0; i < 20; i++) {
        pingpong(buf, 8, 1);
        allreduce(in, out, 1, 1);
    }

    for (size_t len = o.min_bytes; len <= o.max_bytes; len *= 2) {
        if (wants(&o, "latency")) {
            double t = BENCH_TIMED(pingpong(buf, len, 1), &o, iters);
            if (rank == 0) {
                printf("latency,%zu,%.3f\n", len, t / 2 * 1e6);
                fprintf(stderr, "  latency   %8zu B  %10.2f us   (%d iters)\n", len, t / 2 * 1e6,
                        iters);
            }
        }
        if (wants(&o, "bandwidth")) {
            double t = BENCH_TIMED(stream(buf, len, 1), &o, iters);
            if (rank == 0) {
                double mbs = (double)len * BENCH_WINDOW / t / 1e6;
                printf("bandwidth,%zu,%.3f\n", len, mbs);
                fprintf(stderr, "  bandwidth %8zu B  %10.2f MB/s (%d iters)\n", len, mbs, iters);
            }
        }
        if (wants(&o, "allreduce")) {
            size_t count = len / sizeof(double) ? len / sizeof(double) : 1;
            double t     = BENCH_TIMED(allreduce(in, out, count, 1), &o, iters);
            /* Every element must be the sum of 1..nranks. */
            double want = (double)nranks * (nranks + 1) / 2;
            int    bad = out[0] != want || out[count - 1] != want, any_bad = 0;
            MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
            if (any_bad) {
                if (rank == 0)
                    fprintf(stderr, "allreduce of %zu B returned a wrong sum\n", len);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            if (rank == 0) {
                printf("allreduce,%zu,%.3f\n", len, t * 1e6);
                fprintf(stderr, "  allreduce %8zu B  %10.2f us   (%d iters)\n", len, t * 1e6,
                        iters);
            }
        }
        if (rank == 0)
            fflush(stdout);
        if (len > SIZE_MAX / 2)
            break;
    }

    free(buf);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
