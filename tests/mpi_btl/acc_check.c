/*
 * MPI_Accumulate of several elements (32 ints, MPI_SUM) from rank 0 into
 * rank 1's created window under a shared lock, each flushed, N times; rank 1
 * checks the sums. Prints "acc_check: <errors> wrong elements"; exits 1 on
 * any. The counters of the btl say how osc rdma ran it (an atomic per
 * element, or get-modify-put).
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

enum {
    kCount = 32
};

int main(int argc, char **argv)
{
    int     rank, size, n = argc > 1 ? atoi(argv[1]) : 20;
    int     window[kCount] = {0}, origin[kCount];
    long    wrong = 0, total = 0;
    MPI_Win win;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || n < 1) {
        fprintf(stderr, "acc_check: 2 ranks and a positive count\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < kCount; i++) {
        origin[i] = i + 1;
    }
    MPI_Win_create(window, sizeof(window), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (int k = 0; k < n; k++) {
            MPI_Accumulate(origin, kCount, MPI_INT, 1, 0, kCount, MPI_INT, MPI_SUM, win);
            MPI_Win_flush(1, win);
        }
        MPI_Win_unlock(1, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
        for (int i = 0; i < kCount; i++) {
            wrong += window[i] != n * (i + 1);
        }
        MPI_Win_unlock(1, win);
    }
    MPI_Win_free(&win);
    MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("acc_check: %ld wrong elements\n", total);
    }
    MPI_Finalize();
    return total != 0;
}
