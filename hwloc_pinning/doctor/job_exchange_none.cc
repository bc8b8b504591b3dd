// Built without MPI (DOORBELL_ADAPTERS=OFF or no Open MPI): --mpi reports that
// the job-wide comparison is unavailable instead of pretending to do it.
#include "doctor.h"

namespace doorbell::doctor {

bool job_available()
{
    return false;
}

bool job_exchange_firmware(Context &ctx)
{
    ctx.job_error =
        "this doorbell-doctor was built without MPI (DOORBELL_ADAPTERS=OFF): --mpi is unavailable";
    return false;
}

std::string job_gather_reports(Context &, const std::string &mine, bool, Status &)
{
    return mine;
}

void job_finalize() {}

} // namespace doorbell::doctor
