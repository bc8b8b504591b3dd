/*
 * Verbose output, as coll/ucc does it. Levels: 1 = library lifecycle,
 * 2 = team creation, 3 = each call, 5 = why something falls back.
 */
#ifndef MCA_COLL_DOORBELL_DEBUG_H
#define MCA_COLL_DOORBELL_DEBUG_H

#include "opal/util/output.h"

#define DOORBELL_VERBOSE(_lvl, _fmt, ...)                                   \
    opal_output_verbose(_lvl, mca_coll_doorbell_component.output,           \
                        "%s:%d - %s() " _fmt, __FILE__, __LINE__, __func__, \
                        ##__VA_ARGS__)

#define DOORBELL_ERROR(_fmt, ...)                                        \
    opal_output_verbose(0, mca_coll_doorbell_component.output,           \
                        "%s:%d - %s() ERROR: " _fmt, __FILE__, __LINE__, \
                        __func__, ##__VA_ARGS__)

#endif
