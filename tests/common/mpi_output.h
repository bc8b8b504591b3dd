/*
 * Counting what the ranks of an mpirun job printed.
 */
#pragma once

#include <cstddef>

namespace doorbell::test {

/// Of n lines the ranks printed, how many at least arrive whole. mpirun
/// forwards each rank's output in chunks cut at any byte, so on a loaded
/// host a line can come apart where another rank's chunk is written into
/// it (2509 of 2511 once in CI); a count of n lines allows 1 % of them.
inline size_t whole_lines_of(size_t n)
{
    return n - n / 100;
}

/// Cases `coll_mpi_check 1 types` runs (tests/coll/allreduce_types_check.c):
/// every op on every predefined type it is defined on, three counts, and the
/// floating-point sums. Each is one MPI_Allreduce per rank.
inline constexpr size_t kTypeCases = 867;

} // namespace doorbell::test
