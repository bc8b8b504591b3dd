/*
 * doorbell-mpi-check: correctness across the fabric, for the fabric tests.
 *
 *   doorbell-mpi-check p2p [MAX]  every rank pair exchanges every size from
 *                                 0 B to MAX bytes (default and limit 4 MiB;
 *                                 eager and rendezvous), both directions,
 *                                 each byte checked
 *   doorbell-mpi-check allreduce  MPI_Allreduce (int sum, double max) of
 *                                 0..1 Mi elements, every element checked
 * Prints "<test> OK <n> checks" on rank 0 and exits 0, or names the first
 * wrong byte and exits 1.
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_MAX_BYTES (4u << 20)

static int    rank, nranks;
static size_t max_bytes = CHECK_MAX_BYTES;

static unsigned char pattern(int from, int to, size_t len, size_t i)
{
    return (unsigned char)(from * 31 + to * 7 + len * 13 + i * 101 + (i >> 8));
}

static size_t p2p_sizes(size_t *sizes)
{
    size_t n = 0;

    sizes[n++] = 0;
    for (size_t s = 1; s <= max_bytes; s *= 2) {
        sizes[n++] = s;
        if (s > 2 && s < max_bytes)
            sizes[n++] = s + s / 2 + 1; /* odd sizes between the powers */
    }
    return n;
}

static int check_p2p(long *checks)
{
    size_t         sizes[64], nsizes = p2p_sizes(sizes);
    unsigned char *sbuf = malloc(CHECK_MAX_BYTES), *rbuf = malloc(CHECK_MAX_BYTES);
    int            bad = 0;

    if (!sbuf || !rbuf)
        return -1;
    /* Every ordered pair (a, b), a < b: a sends, b echoes a different pattern. */
    for (int a = 0; a < nranks && !bad; a++) {
        for (int b = a + 1; b < nranks && !bad; b++) {
            for (size_t k = 0; k < nsizes && !bad; k++) {
                size_t len  = sizes[k];
                int    me_a = rank == a, me_b = rank == b;
                if (!me_a && !me_b)
                    continue;
                int other = me_a ? b : a;
                for (size_t i = 0; i < len; i++)
                    sbuf[i] = pattern(rank, other, len, i);
                memset(rbuf, 0xee, len);
                if (me_a) {
                    MPI_Send(sbuf, (int)len, MPI_BYTE, other, 5, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, (int)len, MPI_BYTE, other, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, (int)len, MPI_BYTE, other, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, (int)len, MPI_BYTE, other, 6, MPI_COMM_WORLD);
                }
                for (size_t i = 0; i < len; i++) {
                    if (rbuf[i] != pattern(other, rank, len, i)) {
                        fprintf(stderr,
                                "p2p: rank %d from %d, %zu B: byte %zu is 0x%02x, want 0x%02x\n",
                                rank, other, len, i, rbuf[i], pattern(other, rank, len, i));
                        bad = 1;
                        break;
                    }
                }
                ++*checks;
            }
        }
    }
    free(sbuf);
    free(rbuf);
    return bad;
}

static int check_allreduce(long *checks)
{
    const size_t max_count = 1u << 20;
    int         *iin = malloc(max_count * sizeof(int)), *iout = malloc(max_count * sizeof(int));
    double *din = malloc(max_count * sizeof(double)), *dout = malloc(max_count * sizeof(double));
    int     bad = 0;

    if (!iin || !iout || !din || !dout)
        return -1;
    for (size_t count = 0; count <= max_count && !bad; count = count ? count * 4 : 1) {
        for (size_t i = 0; i < count; i++) {
            iin[i] = (int)((i % 1000) * (rank + 1));
            din[i] = (double)rank * 0.5 + (double)(i % 7);
        }
        MPI_Allreduce(iin, iout, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(din, dout, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        for (size_t i = 0; i < count; i++) {
            int    want_i = (int)((i % 1000) * (size_t)(nranks * (nranks + 1) / 2));
            double want_d = (double)(nranks - 1) * 0.5 + (double)(i % 7);
            if (iout[i] != want_i || dout[i] != want_d) {
                fprintf(
                    stderr,
                    "allreduce: rank %d, count %zu, element %zu: sum %d (want %d), max %g (want %g)\n",
                    rank, count, i, iout[i], want_i, dout[i], want_d);
                bad = 1;
                break;
            }
        }
        *checks += 2;
    }
    free(iin);
    free(iout);
    free(din);
    free(dout);
    return bad;
}

int main(int argc, char **argv)
{
    long checks = 0, total = 0;
    int  bad, any_bad      = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc == 3 && strcmp(argv[1], "p2p") == 0)
        max_bytes = strtoull(argv[2], NULL, 0);
    if (argc < 2 || argc > 3 ||
        (strcmp(argv[1], "p2p") != 0 && strcmp(argv[1], "allreduce") != 0) ||
        (argc == 3 && strcmp(argv[1], "p2p") != 0) || max_bytes < 1 ||
        max_bytes > CHECK_MAX_BYTES) {
        if (rank == 0)
            fprintf(stderr, "usage: %s p2p [MAX_BYTES <= %u] | allreduce\n", argv[0],
                    CHECK_MAX_BYTES);
        MPI_Finalize();
        return 2;
    }
    bad = strcmp(argv[1], "p2p") == 0 ? check_p2p(&checks) : check_allreduce(&checks);
    if (bad < 0)
        fprintf(stderr, "rank %d: out of memory\n", rank);
    bad = bad != 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    MPI_Reduce(&checks, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %s %ld checks on %d ranks\n", argv[1], any_bad ? "FAILED" : "OK", total, nranks);
    MPI_Finalize();
    return any_bad ? 1 : 0;
}
