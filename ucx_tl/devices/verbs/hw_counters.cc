#include "hw_counters.h"

#include <fstream>

namespace doorbell::verbs {

namespace {

bool read_u64(const std::string &path, uint64_t *v)
{
    std::ifstream      in(path);
    unsigned long long x;
    if (!(in >> x)) {
        return false;
    }
    *v = x;
    return true;
}

} // namespace

CongestionCounters read_congestion_counters(const std::string &root, const std::string &hca,
                                            unsigned port)
{
    CongestionCounters c;
    std::string        dir = root + "/" + hca + "/ports/" + std::to_string(port) + "/hw_counters/";
    bool               a   = read_u64(dir + "np_ecn_marked_roce_packets", &c.ecn_marked);
    bool               b   = read_u64(dir + "np_cnp_sent", &c.cnp_sent);
    bool               d   = read_u64(dir + "rp_cnp_handled", &c.cnp_handled);
    c.present              = a || b || d;
    return c;
}

} // namespace doorbell::verbs
