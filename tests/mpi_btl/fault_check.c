/*
 * doorbell-fault-check: a peer fails in the middle of an exchange; the other
 * rank's communication must end with an error, never hang.
 *   fault_check stop   rank 1 stops (SIGSTOP): alive for the kernel and
 *                      mpirun, silent on the network, as a hung host
 *   fault_check kill   rank 1 is killed (SIGKILL)
 * Rank 0 keeps exchanging with rank 1; the program never ends normally while
 * the peer is gone, so a clean exit is a failure of the test.
 */
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    static char buf[65536];
    int         rank, stop;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 2 || (strcmp(argv[1], "stop") && strcmp(argv[1], "kill"))) {
        fprintf(stderr, "usage: fault_check stop|kill\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    stop = strcmp(argv[1], "stop") == 0;

    /* both directions work before the failure */
    MPI_Sendrecv_replace(buf, 1024, MPI_BYTE, rank ^ 1, 0, rank ^ 1, 0, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        raise(stop ? SIGSTOP : SIGKILL);
    } else if (rank == 0) {
        printf("fault-check: peer %s, exchanging\n", stop ? "stopped" : "killed");
        fflush(stdout);
        for (;;) {
            MPI_Send(buf, sizeof(buf), MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, sizeof(buf), MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_Finalize();
    printf("fault-check: rank %d ended normally\n", rank);
    return 0;
}
