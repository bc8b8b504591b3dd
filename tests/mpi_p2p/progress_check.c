/*
 * Asynchronous progress: rank 0 starts a rendezvous send (8 MiB) and then
 * computes without calling MPI. Rank 1 receives it: its RDMA reads must be
 * served by rank 0's transport while rank 0's application is away, as a NIC
 * would. Rank 1 signals completion through a file; rank 0 waits for the file
 * outside MPI (bounded, so a failure ends instead of hanging).
 *   progress_check <signal file> [bytes, default 8 MiB]
 * Exit status 0 when rank 1 completed while rank 0 stayed out of MPI.
 */
#include <mpi.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE  (8u << 20)
#define BOUND_SEC 20.0

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int            rank, ok = 1, all_ok = 0;
    unsigned char *buf;
    size_t         size;
    MPI_Request    req;
    size_t         i;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2) {
        fprintf(stderr, "usage: progress_check <signal file>\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size = (argc > 2) ? strtoul(argv[2], NULL, 0) : MAX_SIZE;
    if (size == 0 || size > MAX_SIZE) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    buf = malloc(size);
    if (buf == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    if (rank == 0) {
        double start;
        unlink(argv[1]);
        for (i = 0; i < size; ++i) {
            buf[i] = (unsigned char)(i * 7 + 1);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* the file is gone before rank 1 looks */
        MPI_Isend(buf, (int)size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, &req);
        start = now_sec();
        while (access(argv[1], F_OK) != 0) { /* computing: no MPI calls */
            if (now_sec() - start > BOUND_SEC) {
                fprintf(stderr, "rank 0: the receiver did not complete while"
                                " the sender stayed out of MPI\n");
                ok = 0;
                break;
            }
        }
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        double start;
        MPI_Barrier(MPI_COMM_WORLD);
        start = now_sec();
        MPI_Recv(buf, (int)size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* for the reader, not checked: a shared machine's timing is noise */
        printf("rank 1: %zu bytes received in %.1f ms\n", size, (now_sec() - start) * 1e3);
        for (i = 0; i < size; ++i) {
            if (buf[i] != (unsigned char)(i * 7 + 1)) {
                fprintf(stderr, "rank 1: byte %zu is wrong\n", i);
                ok = 0;
                break;
            }
        }
        close(open(argv[1], O_CREAT | O_WRONLY, 0600));
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }

    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0) {
        unlink(argv[1]);
        printf("progress_check: %s\n", all_ok ? "receiver completed while the"
                                                " sender computed" :
                                                "FAILED");
    }
    free(buf);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
