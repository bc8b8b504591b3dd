/*
 * The btl's registration cache, seen through ob1's rendezvous (messages
 * above the 40 KiB eager limit: the sender registers its buffer for a
 * remote read, the receiver reads it). Rank 0 sends, rank 1 checks every
 * byte.
 *   reuse N      one buffer sent N times (its content changed each time)
 *   cycle N K    N messages from K buffers in turn
 *   remap N      N times: mmap a buffer, send it, munmap it (the next mmap
 *                gets the same address back, as a fresh allocation would)
 * Prints "rcache_check: <mode> <errors> wrong bytes"; exits 1 on any.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    kBytes = 256 * 1024
};

static void fill(unsigned char *p, int round)
{
    for (int i = 0; i < kBytes; i++) {
        p[i] = (unsigned char)(i * 7 + round * 13 + 1);
    }
}

static long check(const unsigned char *p, int round)
{
    long wrong = 0;
    for (int i = 0; i < kBytes; i++) {
        wrong += p[i] != (unsigned char)(i * 7 + round * 13 + 1);
    }
    return wrong;
}

int main(int argc, char **argv)
{
    int            rank, n = argc > 2 ? atoi(argv[2]) : 20;
    int            k     = argc > 3 ? atoi(argv[3]) : 1;
    const char    *mode  = argc > 1 ? argv[1] : "reuse";
    int            remap = strcmp(mode, "remap") == 0;
    long           wrong = 0, total = 0;
    unsigned char *bufs[16], *in;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (k < 1 || k > 16 || n < 1) {
        fprintf(stderr, "rcache_check: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int b = 0; b < k && !remap; b++) {
        bufs[b] = malloc(kBytes);
    }
    in = malloc(kBytes);
    for (int round = 0; round < n; round++) {
        if (rank == 0) {
            unsigned char *out = bufs[round % k];
            if (remap) {
                out = mmap(NULL, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                           0);
                if (out == MAP_FAILED) {
                    MPI_Abort(MPI_COMM_WORLD, 2);
                }
            }
            fill(out, round);
            MPI_Send(out, kBytes, MPI_BYTE, 1, round, MPI_COMM_WORLD);
            if (remap) {
                munmap(out, kBytes);
            }
        } else if (rank == 1) {
            memset(in, 0, kBytes);
            MPI_Recv(in, kBytes, MPI_BYTE, 0, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            wrong += check(in, round);
        }
    }
    MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("rcache_check: %s %ld wrong bytes\n", mode, total);
    }
    for (int b = 0; b < k && !remap; b++) {
        free(bufs[b]);
    }
    free(in);
    MPI_Finalize();
    return total != 0;
}
