/*
 * MPI point-to-point check: every rank exchanges messages of every size from
 * 0 B to 16 MiB (powers of two and odd sizes, so both eager and rendezvous
 * protocols run) with both ring neighbours at once, and checks every byte.
 * Exit status 0 when all ranks saw correct data; 1 otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE (16u << 20)

/* The byte a sender `src` puts at `offset` of a message of `size` bytes. */
static uint8_t pattern(int src, size_t size, size_t offset, int dir)
{
    uint64_t x = (uint64_t)src * 0x9e3779b97f4a7c15ull ^ (uint64_t)size * 31u ^
                 (uint64_t)offset * 0x2545f4914f6cdd1dull ^ (uint64_t)dir;
    return (uint8_t)(x ^ (x >> 29) ^ (x >> 47));
}

static void fill(uint8_t *buf, int src, size_t size, int dir)
{
    size_t i;
    for (i = 0; i < size; ++i) {
        buf[i] = pattern(src, size, i, dir);
    }
}

/* Returns the number of wrong bytes and reports the first one. */
static size_t check(const uint8_t *buf, int src, size_t size, int dir, int rank)
{
    size_t i, bad = 0;
    for (i = 0; i < size; ++i) {
        if (buf[i] != pattern(src, size, i, dir)) {
            if (bad == 0) {
                fprintf(stderr,
                        "rank %d: size %zu from %d dir %d: byte %zu is"
                        " 0x%02x, expected 0x%02x\n",
                        rank, size, src, dir, i, buf[i], pattern(src, size, i, dir));
            }
            ++bad;
        }
    }
    return bad;
}

static size_t build_sizes(size_t *sizes)
{
    static const size_t odd[] = {3,     7,      100,    1000,    4095,    8193,        12345,
                                 65537, 100000, 262143, 1000001, 3333333, MAX_SIZE - 1};
    size_t              n     = 0, s, i;

    sizes[n++] = 0;
    for (s = 1; s <= MAX_SIZE; s <<= 1) {
        sizes[n++] = s;
    }
    for (i = 0; i < sizeof(odd) / sizeof(odd[0]); ++i) {
        sizes[n++] = odd[i];
    }
    return n;
}

int main(int argc, char **argv)
{
    size_t      sizes[64], nsizes, k, bad = 0, total_bad = 0;
    uint8_t    *send_r, *send_l, *recv_r, *recv_l;
    int         rank, nranks, right, left;
    MPI_Request reqs[4];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    right = (rank + 1) % nranks;
    left  = (rank + nranks - 1) % nranks;

    send_r = malloc(MAX_SIZE);
    send_l = malloc(MAX_SIZE);
    recv_r = malloc(MAX_SIZE);
    recv_l = malloc(MAX_SIZE);
    if (!send_r || !send_l || !recv_r || !recv_l) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    nsizes = build_sizes(sizes);
    for (k = 0; k < nsizes; ++k) {
        size_t size = sizes[k];

        /* dir 0 travels rightwards, dir 1 leftwards */
        fill(send_r, rank, size, 0);
        fill(send_l, rank, size, 1);
        memset(recv_r, 0xee, size);
        memset(recv_l, 0xee, size);

        MPI_Irecv(recv_l, (int)size, MPI_BYTE, left, 0, MPI_COMM_WORLD, &reqs[0]);
        MPI_Irecv(recv_r, (int)size, MPI_BYTE, right, 1, MPI_COMM_WORLD, &reqs[1]);
        MPI_Isend(send_r, (int)size, MPI_BYTE, right, 0, MPI_COMM_WORLD, &reqs[2]);
        MPI_Isend(send_l, (int)size, MPI_BYTE, left, 1, MPI_COMM_WORLD, &reqs[3]);
        MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE);

        bad += check(recv_l, left, size, 0, rank);
        bad += check(recv_r, right, size, 1, rank);
    }

    MPI_Reduce(&bad, &total_bad, 1, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("p2p_check: %d ranks, %zu sizes (0 B .. %u B), %zu wrong bytes\n", nranks, nsizes,
               MAX_SIZE, total_bad);
    }

    free(send_r);
    free(send_l);
    free(recv_r);
    free(recv_l);
    MPI_Finalize();
    return (total_bad == 0) ? 0 : 1;
}
