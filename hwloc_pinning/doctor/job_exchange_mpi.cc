// --mpi under mpirun: every rank sends its "host dev hca_type fw_ver" lines to
// every rank (MPI_Allgatherv), so each can compare the job's firmware; then
// rank 0 gathers the rendered reports and prints them in rank order, and all
// ranks exit with the job's worst status. MPI is initialised only here and
// only when mpirun launched us: a singleton MPI_Init can hang in containers.
#include "doctor.h"

#include <climits>
#include <cstdlib>
#include <mpi.h>
#include <sstream>

namespace doorbell::doctor {

static bool g_initialised = false;

bool job_available()
{
    return true;
}

// All ranks' strings, in rank order; false when lengths do not add up.
static bool allgather_strings(const std::string &mine, std::vector<std::string> &all)
{
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (mine.size() > size_t(INT_MAX))
        return false;
    int              len = int(mine.size());
    std::vector<int> lens(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
    if (MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD) != MPI_SUCCESS)
        return false;
    long long total = 0;
    for (int r = 0; r < size; r++) {
        if (lens[size_t(r)] < 0)
            return false;
        displs[size_t(r)] = int(total);
        total += lens[size_t(r)];
        if (total > INT_MAX)
            return false;
    }
    std::string buf(size_t(total), '\0');
    if (MPI_Allgatherv(mine.data(), len, MPI_CHAR, buf.data(), lens.data(), displs.data(), MPI_CHAR,
                       MPI_COMM_WORLD) != MPI_SUCCESS)
        return false;
    all.clear();
    for (int r = 0; r < size; r++)
        all.push_back(buf.substr(size_t(displs[size_t(r)]), size_t(lens[size_t(r)])));
    return true;
}

bool job_exchange_firmware(Context &ctx)
{
    if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMIX_RANK")) {
        ctx.job_error = "--mpi: not launched by mpirun (OMPI_COMM_WORLD_SIZE unset)";
        return false;
    }
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
        ctx.job_error = "--mpi: MPI_Init failed";
        return false;
    }
    g_initialised = true;
    std::string mine;
    for (const RdmaDevice &dev : ctx.inv.rdma)
        if (!dev.fw_ver.empty())
            mine += firmware_line(ctx.host, dev) + "\n";
    std::vector<std::string> all;
    if (!allgather_strings(mine, all)) {
        ctx.job_error = "--mpi: exchanging firmware lists failed";
        return false;
    }
    ctx.job_firmware.clear();
    for (const std::string &chunk : all) {
        std::istringstream in(chunk);
        for (std::string line; std::getline(in, line);)
            if (!line.empty())
                ctx.job_firmware.push_back(line);
    }
    return true;
}

std::string job_gather_reports(Context &, const std::string &mine, bool json, Status &worst_inout)
{
    int rank = 0, w = int(worst_inout), job_worst = w;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Allreduce(&w, &job_worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    worst_inout = Status(job_worst);
    // Every rank takes part; only rank 0 prints. Allgather keeps this to one
    // helper; the reports are a few KiB each.
    std::vector<std::string> all;
    if (!allgather_strings(mine, all))
        return rank == 0 ? mine + "doorbell-doctor: gathering the other ranks' reports failed\n" :
                           "";
    if (rank != 0)
        return "";
    std::string out = json ? "{\"job\":[\n" : "";
    for (size_t r = 0; r < all.size(); r++) {
        if (json)
            out += (r ? "," : "") + all[r];
        else
            out += "=== rank " + std::to_string(r) + " ===\n" + all[r] + "\n";
    }
    if (json)
        out += "],\"worst\":\"" + std::string(status_name(worst_inout)) + "\"}\n";
    else
        out += "job: worst finding over " + std::to_string(all.size()) +
               " rank(s): " + status_name(worst_inout) + "\n";
    return out;
}

void job_finalize()
{
    if (g_initialised)
        MPI_Finalize();
    g_initialised = false;
}

} // namespace doorbell::doctor
