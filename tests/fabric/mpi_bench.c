/*
 * doorbell-mpi-bench: point-to-point latency and bandwidth between two ranks
 * (--pair; by default the first and the last), and MPI_Allreduce over all
 * ranks, from --min to --max bytes in powers of two. scripts/run.sh runs the
 * same binary, with the same options, once per stack and round.
 *
 * Output, one line per measurement (CSV, for scripts/report/mpi_report.py):
 *   latency,<bytes>,<us one way>,<iterations>     ping-pong, half the round trip
 *   bandwidth,<bytes>,<MB/s>,<iterations>         window of non-blocking sends, one ack
 *   allreduce,<bytes>,<us per call>,<iterations>  MPI_DOUBLE sum, bytes/8 elements
 * Progress goes to stderr.
 *
 * Every size of every benchmark: a warm-up that repeats the call, doubling the
 * count, until a fifth of the budget has passed and the last block made at
 * least BENCH_WARMUP_CALLS calls (buffers, registrations, the protocol for that
 * size, caches, first-touched pages), then as many calls as the warm-up's rate
 * says fit in --budget-ms (at least BENCH_MIN_ITERS), timed after a barrier in
 * BENCH_BLOCKS consecutive blocks on the clock of the pair's first rank; the
 * figure is the median block's time per call. So a size takes about 1.2-1.4 budgets on
 * any network (loopback or a 200 Mb/s spine), except where 7 warm-up calls
 * (1 + 2 + 4) or BENCH_MIN_ITERS timed ones take longer.
 *
 *   doorbell-mpi-bench [--min B] [--max B] [--budget-ms MS] [--pair A,B]
 *                      [--only latency|bandwidth|allreduce]
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_WINDOW       16      /* messages in flight per bandwidth round */
#define BENCH_MIN_ITERS    3       /* timed calls, however slow */
#define BENCH_MAX_ITERS    1000000 /* timed calls, however fast */
#define BENCH_WARMUP_SHARE 5       /* warm-up until budget / 5 has passed */
#define BENCH_WARMUP_CALLS 4       /* and its last block made at least this many calls */
#define BENCH_BLOCKS       5       /* the timed calls in blocks; their median is reported */

struct bench_opts {
    size_t      min_bytes;
    size_t      max_bytes;
    double      budget_s; /* seconds per size and benchmark */
    int         pair[2];  /* the ranks of the point-to-point tests; -1: last */
    const char *only;     /* NULL: all */
};

/* One benchmark's call, repeated: every rank calls it with the same arguments. */
typedef void (*bench_op)(size_t len, int iters);

static int     rank, nranks, ping, pong;
static char   *buf;
static double *in, *out;

/* Waits for a request, sleeping between polls: the ranks that sit out a
 * point-to-point test (and every rank between tests) must not take CPU time
 * from the two that are measured; the host may have fewer cores than ranks.
 * The nap grows to 1 ms, since a rank that sits out waits for a whole size. */
static void bench_wait(MPI_Request *req)
{
    struct timespec nap  = {0, 20000}; /* 20 us */
    int             done = 0;

    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        nanosleep(&nap, NULL);
        nap.tv_nsec = nap.tv_nsec < 500000 ? nap.tv_nsec * 2 : 1000000;
    }
}

static void bench_barrier(void)
{
    MPI_Request req;

    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    bench_wait(&req);
}

static int bench_bcast_int(int value)
{
    MPI_Request req;

    MPI_Ibcast(&value, 1, MPI_INT, ping, MPI_COMM_WORLD, &req);
    bench_wait(&req);
    return value;
}

static void pingpong(size_t len, int iters)
{
    for (int i = 0; i < iters; i++) {
        if (rank == ping) {
            MPI_Send(buf, (int)len, MPI_CHAR, pong, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)len, MPI_CHAR, pong, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == pong) {
            MPI_Recv(buf, (int)len, MPI_CHAR, ping, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)len, MPI_CHAR, ping, 1, MPI_COMM_WORLD);
        }
    }
}

static void stream(size_t len, int iters)
{
    MPI_Request req[BENCH_WINDOW];
    char        ack = 0;

    for (int i = 0; i < iters; i++) {
        if (rank == ping) {
            for (int w = 0; w < BENCH_WINDOW; w++)
                MPI_Isend(buf + (size_t)w * len, (int)len, MPI_CHAR, pong, 2, MPI_COMM_WORLD,
                          &req[w]);
            MPI_Waitall(BENCH_WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_CHAR, pong, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == pong) {
            for (int w = 0; w < BENCH_WINDOW; w++)
                MPI_Irecv(buf + (size_t)w * len, (int)len, MPI_CHAR, ping, 2, MPI_COMM_WORLD,
                          &req[w]);
            MPI_Waitall(BENCH_WINDOW, req, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_CHAR, ping, 3, MPI_COMM_WORLD);
        }
    }
}

static size_t allreduce_count(size_t len)
{
    return len / sizeof(double) ? len / sizeof(double) : 1;
}

static void allreduce(size_t len, int iters)
{
    for (int i = 0; i < iters; i++)
        MPI_Allreduce(in, out, (int)allreduce_count(len), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Times iters calls as BENCH_BLOCKS consecutive blocks (fewer when there are
 * fewer calls) and returns the median of their seconds per call. This machine
 * stops a virtual CPU now and then for 5-50 ms (docs/fabric.md, "Pauses of
 * the machine itself"): in one block of 20000 round trips of 10 us a single
 * 50 ms pause moves the mean by 2.5 us, in any stack, and decides a cell.
 * A pause that falls in one block of five moves the median by less than the
 * blocks' own spread; pauses in most blocks still show. */
static double bench_median_block(bench_op op, size_t len, int iters)
{
    double per[BENCH_BLOCKS];
    int    blocks = iters < BENCH_BLOCKS ? iters : BENCH_BLOCKS;

    for (int b = 0; b < blocks; b++) {
        int    n  = iters / blocks + (b < iters % blocks ? 1 : 0);
        double t0 = MPI_Wtime();

        op(len, n);
        per[b] = (MPI_Wtime() - t0) / n;
    }
    qsort(per, (size_t)blocks, sizeof(double), cmp_double);
    return blocks % 2 ? per[blocks / 2] : (per[blocks / 2 - 1] + per[blocks / 2]) / 2;
}

/* Warms up, chooses the count from the warm-up's rate, and times that many
 * calls; returns seconds per call (the clock of the pair's first rank, which
 * takes part in every benchmark) and the count. That rank decides every step
 * and tells the others, so all ranks make the same calls. */
static double bench_time(bench_op op, size_t len, const struct bench_opts *o, int *iters_p)
{
    double spent = 0, t0, t1;
    int    n     = 1, iters;

    for (;;) {
        bench_barrier();
        t0 = MPI_Wtime();
        op(len, n);
        t1 = MPI_Wtime();
        spent += t1 - t0;
        iters = 0; /* 0: warm up again, with twice the calls */
        /* The first two calls of a new size can each cost 20-50 times a later one
         * (fresh pages of temporary buffers, in every stack): a rate from a block
         * of one call would time those two. */
        if (rank == ping &&
            ((spent >= o->budget_s / BENCH_WARMUP_SHARE && n >= BENCH_WARMUP_CALLS) ||
             n >= BENCH_MAX_ITERS)) {
            double per = (t1 - t0) / n, want = per > 0 ? o->budget_s / per : BENCH_MAX_ITERS;
            iters = want < BENCH_MIN_ITERS ? BENCH_MIN_ITERS :
                    want > BENCH_MAX_ITERS ? BENCH_MAX_ITERS :
                                             (int)want;
        }
        iters = bench_bcast_int(iters);
        if (iters > 0)
            break;
        n *= 2;
    }
    bench_barrier();
    *iters_p = iters;
    return bench_median_block(op, len, iters);
}

static int wants(const struct bench_opts *o, const char *what)
{
    return o->only == NULL || strcmp(o->only, what) == 0;
}

static int parse_size(const char *s, size_t *v)
{
    char              *end;
    unsigned long long x = strtoull(s, &end, 0);

    if (*s == '\0' || *s == '-' || *end != '\0')
        return -1;
    *v = (size_t)x;
    return 0;
}

static int usage(const char *prog, const char *why)
{
    if (rank == 0) {
        if (why)
            fprintf(stderr, "%s: %s\n", prog, why);
        fprintf(stderr,
                "usage: %s [--min B] [--max B] [--budget-ms MS] [--pair A,B] "
                "[--only latency|bandwidth|allreduce]\n",
                prog);
    }
    return -1;
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
    o->min_bytes = 8;
    o->max_bytes = 1 << 20;
    o->budget_s  = 0.05;
    o->pair[0]   = 0;
    o->pair[1]   = -1;
    o->only      = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char       *end;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            return usage(argv[0], NULL);
        if (val == NULL)
            return usage(argv[0], "an option without its value");
        i++;
        if (strcmp(arg, "--min") == 0) {
            if (parse_size(val, &o->min_bytes) != 0)
                return usage(argv[0], "--min takes a number of bytes");
        } else if (strcmp(arg, "--max") == 0) {
            if (parse_size(val, &o->max_bytes) != 0)
                return usage(argv[0], "--max takes a number of bytes");
        } else if (strcmp(arg, "--budget-ms") == 0) {
            o->budget_s = strtod(val, &end) / 1000.0;
            if (*end != '\0' || !(o->budget_s > 0))
                return usage(argv[0], "--budget-ms takes a positive number of milliseconds");
        } else if (strcmp(arg, "--pair") == 0) {
            if (sscanf(val, "%d,%d", &o->pair[0], &o->pair[1]) != 2)
                return usage(argv[0], "--pair takes two ranks, A,B");
        } else if (strcmp(arg, "--only") == 0) {
            if (strcmp(val, "latency") && strcmp(val, "bandwidth") && strcmp(val, "allreduce"))
                return usage(argv[0], "--only takes latency, bandwidth or allreduce");
            o->only = val;
        } else {
            return usage(argv[0], "unknown option");
        }
    }
    if (o->pair[1] == -1)
        o->pair[1] = nranks - 1;
    if (o->min_bytes < 1 || o->max_bytes < o->min_bytes || o->max_bytes > (1u << 26))
        return usage(argv[0], "need 1 <= --min <= --max <= 64 MiB");
    if (o->pair[0] < 0 || o->pair[1] < 0 || o->pair[0] >= nranks || o->pair[1] >= nranks ||
        o->pair[0] == o->pair[1])
        return usage(argv[0], "--pair needs two different ranks of the job");
    return 0;
}

static void report(const char *what, size_t len, double value, const char *unit, int iters)
{
    if (rank != ping)
        return;
    printf("%s,%zu,%.3f,%d\n", what, len, value, iters);
    fflush(stdout);
    fprintf(stderr, "  %-9s %8zu B  %10.2f %-4s (%d iters)\n", what, len, value, unit, iters);
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    int               iters;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks < 2) {
        if (rank == 0)
            fprintf(stderr, "%s: needs at least 2 ranks\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (parse_opts(argc, argv, &o) != 0) {
        MPI_Finalize();
        return 2;
    }
    ping = o.pair[0];
    pong = o.pair[1];

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
    pingpong(8, 20);
    allreduce(8, 20);

    for (size_t len = o.min_bytes; len <= o.max_bytes; len *= 2) {
        if (wants(&o, "latency")) {
            double t = bench_time(pingpong, len, &o, &iters);
            report("latency", len, t / 2 * 1e6, "us", iters);
        }
        if (wants(&o, "bandwidth")) {
            double t = bench_time(stream, len, &o, &iters);
            report("bandwidth", len, (double)len * BENCH_WINDOW / t / 1e6, "MB/s", iters);
        }
        if (wants(&o, "allreduce")) {
            size_t count = allreduce_count(len);
            double t     = bench_time(allreduce, len, &o, &iters);
            /* Every element must be the sum of 1..nranks. */
            double want = (double)nranks * (nranks + 1) / 2;
            int    bad = out[0] != want || out[count - 1] != want, any_bad = 0;
            MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
            if (any_bad) {
                if (rank == 0)
                    fprintf(stderr, "allreduce of %zu B returned a wrong sum\n", len);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            report("allreduce", len, t * 1e6, "us", iters);
        }
        if (len > SIZE_MAX / 2)
            break;
    }

    /* Ranks outside the pair skip the last size's timed block and would wait
     * in MPI_Finalize, whose barrier polls, on the cores the pair is timed on
     * (4 ranks on 2 cores, 8-64 B latency: the last size 20.7-23.3 us against
     * 14.4-17.8 for the others; 13.5-16.3 with this barrier). They wait here
     * as they do between sizes. */
    bench_barrier();
    free(buf);
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
