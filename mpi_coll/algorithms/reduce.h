// Local reduction kernels for every predefined MPI op on every predefined
// type. out[i] = a[i] (op) b[i]; `a` carries the lower ranks' partial result,
// so an order-sensitive case (NaN in MAX, complex PROD, MINLOC ties) gives
// the same bits wherever it is computed. out may alias a or b exactly.
#pragma once

#include "doorbell_coll.h"

#include <cstddef>

namespace doorbell::coll {

size_t dtype_size(doorbell_coll_dtype_t dtype);
bool   op_supported(doorbell_coll_dtype_t dtype, doorbell_coll_op_t op);
void   reduce(doorbell_coll_dtype_t dtype, doorbell_coll_op_t op, const void *a, const void *b,
              void *out, size_t count);

} // namespace doorbell::coll
