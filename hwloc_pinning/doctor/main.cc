// doorbell-doctor: finds firmware mismatches, missing GPUDirect modules,
// degraded PCIe links, misplaced interrupts, heat and congestion.
#include "doctor.h"
#include "doctor_main.h"

#include <cstdio>

int main(int argc, char **argv)
{
    std::vector<std::string> args(argv + 1, argv + argc);
    std::string              out, err;
    int                      rc = doorbell::doctor::doctor_main(args, out, err);
    std::fputs(out.c_str(), stdout);
    std::fputs(err.c_str(), stderr);
    std::fflush(stdout);
    std::fflush(stderr);
    /* Under mpirun (--mpi): MPI_Finalize only after the report is out. A rank
   * that exits with a FAIL status makes mpirun abort the job, and rank 0,
   * which prints every rank's report, lost it when it had not yet written
   * it (MPI_Finalize waits for every rank, so no rank leaves before rank 0
   * is done). No-op otherwise. */
    doorbell::doctor::job_finalize();
    return rc;
}
