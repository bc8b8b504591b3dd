// This process's local rank and the number of local ranks, from the
// launcher's environment:
//   Open MPI (4.x and 5.x): OMPI_COMM_WORLD_LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_SIZE
//   PMIx launchers that export it (PRRTE, Cray PALS): PMIX_LOCAL_RANK / PMIX_LOCAL_SIZE
//   Slurm srun: SLURM_LOCALID / SLURM_STEP_TASKS_PER_NODE + SLURM_NODEID
// PMIX_RANK is the *global* rank (Open MPI 4.1 sets it, not PMIX_LOCAL_RANK)
// and is deliberately not used.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "pinning/status.h"

namespace doorbell::pin {

struct LocalRank {
    int         rank = 0;
    int         size = -1; ///< -1 when the launcher does not say
    std::string source;    ///< the variable the rank came from
};

using GetenvFn = std::function<const char *(const char *)>;

// nullopt when no launcher variable is set; an error when one is set but
// not a number.
Result<std::optional<LocalRank>> local_rank_from_env(const GetenvFn &get);

// "2(x3),1" (SLURM_STEP_TASKS_PER_NODE) -> tasks on node `node`, or -1.
int slurm_tasks_on_node(const std::string &spec, int node);

} // namespace doorbell::pin
