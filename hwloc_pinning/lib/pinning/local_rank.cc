// Launcher environment -> local rank.
#include "pinning/local_rank.h"

#include <charconv>
#include <cstring>

namespace doorbell::pin {

static bool to_int(const char *s, int *out_p)
{
    if (s == nullptr || *s == '\0')
        return false;
    const char *end = s + strlen(s);
    auto [p, ec]    = std::from_chars(s, end, *out_p);
    return ec == std::errc() && p == end && *out_p >= 0;
}

int slurm_tasks_on_node(const std::string &spec, int node)
{
    int    seen = 0;
    size_t i    = 0;
    while (i < spec.size()) {
        size_t      comma = spec.find(',', i);
        std::string item  = spec.substr(i,
                                       comma == std::string::npos ? std::string::npos : comma - i);
        i                 = comma == std::string::npos ? spec.size() : comma + 1;
        int    tasks, reps = 1;
        size_t paren = item.find("(x");
        if (!to_int(item.substr(0, paren).c_str(), &tasks))
            return -1;
        if (paren != std::string::npos) {
            if (item.back() != ')' ||
                !to_int(item.substr(paren + 2, item.size() - paren - 3).c_str(), &reps))
                return -1;
        }
        if (node < seen + reps)
            return tasks;
        seen += reps;
    }
    return -1;
}

Result<std::optional<LocalRank>> local_rank_from_env(const GetenvFn &get)
{
    struct Source {
        const char *rank;
        const char *size;
    };
    static constexpr Source kSources[] = {
        {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
        {"PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE"},
        {"SLURM_LOCALID", nullptr},
    };
    for (const Source &s : kSources) {
        const char *v = get(s.rank);
        if (v == nullptr)
            continue;
        LocalRank lr;
        lr.source = s.rank;
        if (!to_int(v, &lr.rank))
            return Error{std::string(s.rank) + "='" + v +
                         "' is not a local rank (expected a number >= 0)"};
        if (s.size) {
            int n;
            if (to_int(get(s.size), &n) && n > 0)
                lr.size = n;
        } else {
            const char *spec = get("SLURM_STEP_TASKS_PER_NODE");
            int         node = 0;
            if (spec && (get("SLURM_NODEID") == nullptr || to_int(get("SLURM_NODEID"), &node)))
                lr.size = slurm_tasks_on_node(spec, node);
        }
        if (lr.size > 0 && lr.rank >= lr.size)
            return Error{std::string(s.rank) + "=" + std::to_string(lr.rank) +
                         " is not below the number of local ranks (" + std::to_string(lr.size) +
                         ")"};
        return std::optional<LocalRank>(lr);
    }
    return std::optional<LocalRank>();
}

} // namespace doorbell::pin
