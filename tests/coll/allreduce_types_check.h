/*
 * The check of every predefined op/type pair (allreduce_types_check.c).
 */
#ifndef DOORBELL_ALLREDUCE_TYPES_CHECK_H
#define DOORBELL_ALLREDUCE_TYPES_CHECK_H

#include <mpi.h>

#include <stddef.h>
#include <stdint.h>

/* Runs every pair for every count (in place every other case) on comm;
 * prints "TYPES FAIL ..." for each wrong result. Returns the failures on
 * this rank and sets *cases_p to the cases run. */
int check_every_type(MPI_Comm comm, const size_t *counts, int ncounts, int seed, int *cases_p);

/* A digest of the results of every exact case run so far (their significant
 * bytes; complex zeros as +0): equal digests from two jobs mean equal bits. */
uint64_t every_type_digest(void);

#endif
