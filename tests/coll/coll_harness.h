// Test harness for the schedules: inputs that are exact in any order or
// random, the fixed-order reference of each algorithm, comparisons of the
// significant bytes (padding of long double and pair types excluded), and a
// runner that plays every rank on its own thread.
#pragma once

#include "doorbell_coll.h"
#include "fake_transport.h"

#include <cstdint>
#include <string>
#include <vector>

namespace doorbell::coll::testing {

using Bytes = std::vector<unsigned char>;

struct Case {
    doorbell_coll_algorithm_t alg      = DOORBELL_COLL_ALG_AUTO;
    doorbell_coll_dtype_t     dtype    = DOORBELL_COLL_DT_DOUBLE;
    doorbell_coll_op_t        op       = DOORBELL_COLL_OP_SUM;
    size_t                    count    = 0;
    bool                      in_place = false;
    bool                      exact    = true; ///< values whose reduction is exact in any order
    uint64_t                  seed     = 1;
};

// Input of `rank` for case c.
Bytes make_input(const Case &c, int rank);

// (offset, length) of the bytes of one element that carry its value.
std::vector<std::pair<size_t, size_t>> significant(doorbell_coll_dtype_t dtype);
bool same_value(doorbell_coll_dtype_t dtype, const Bytes &a, const Bytes &b, size_t count,
                size_t *first_diff);

// Reference result computed in the order `alg` uses on a team with this
// topology (node_of/leaf_of may be empty), with a single round.
Bytes reference(doorbell_coll_algorithm_t alg, const Case &c, int n,
                const std::vector<int> &node_of, const std::vector<int> &leaf_of);
// Left-to-right fold over ranks 0..n-1.
Bytes sequential(const Case &c, int n);

struct Outcome {
    int         status = 0;
    std::string error;
    Bytes       result;
    Bytes       send; ///< kept until every rank is done: after a failure a put may
                      ///< still reference it
    bool send_intact = true;
};

// Runs every case on every rank of `fabric` (n threads); [case][rank].
std::vector<std::vector<Outcome>> run_cases(FakeFabric &fabric, int n,
                                            const std::vector<Case>      &cases,
                                            const doorbell_coll_tuning_t &tuning,
                                            int                           absent_rank = -1);

} // namespace doorbell::coll::testing
