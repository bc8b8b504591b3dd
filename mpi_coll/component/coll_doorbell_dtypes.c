/*
 * MPI handles -> the schedules' op and type codes. Only predefined handles
 * map; anything else (derived types, user ops) falls back. A type maps only
 * when its extent equals the element size the kernels use and its lower
 * bound is 0, so `count` elements are contiguous.
 */
#include "coll_doorbell.h"

#include "ompi/constants.h"

#include <dlfcn.h>
#include <stdint.h>

typedef struct {
    MPI_Datatype          mpi;
    doorbell_coll_dtype_t dt;
} mca_coll_doorbell_dtype_map_t;

static mca_coll_doorbell_dtype_map_t dtype_map[80];
static int                           dtype_map_len = -1;

static void map_dtype(MPI_Datatype mpi, doorbell_coll_dtype_t dt)
{
    MPI_Aint lb, extent;

    if (mpi == MPI_DATATYPE_NULL ||
        dtype_map_len >= (int)(sizeof(dtype_map) / sizeof(dtype_map[0]))) {
        return;
    }
    if (MPI_Type_get_extent(mpi, &lb, &extent) != MPI_SUCCESS || lb != 0 ||
        (size_t)extent != doorbell_coll_dtype_size(dt)) {
        return;
    }
    dtype_map[dtype_map_len].mpi = mpi;
    dtype_map[dtype_map_len].dt  = dt;
    dtype_map_len++;
}

/* Signed/unsigned integer of `size` bytes. */
static doorbell_coll_dtype_t int_of(size_t size, int is_signed)
{
    switch (size) {
    case 1:
        return is_signed ? DOORBELL_COLL_DT_INT8 : DOORBELL_COLL_DT_UINT8;
    case 2:
        return is_signed ? DOORBELL_COLL_DT_INT16 : DOORBELL_COLL_DT_UINT16;
    case 4:
        return is_signed ? DOORBELL_COLL_DT_INT32 : DOORBELL_COLL_DT_UINT32;
    default:
        return is_signed ? DOORBELL_COLL_DT_INT64 : DOORBELL_COLL_DT_UINT64;
    }
}

static void build_dtype_map(void)
{
    dtype_map_len = 0;
    /* C integers. MPI defines no reduction on MPI_CHAR, but Open MPI
     * reduces it as int8_t (its op table maps MPI_CHAR to INT8_T, signed
     * whatever the platform's char), and the OSU collectives reduce
     * MPI_CHAR by default: so does this component. */
    map_dtype(MPI_CHAR, DOORBELL_COLL_DT_INT8);
    map_dtype(MPI_SIGNED_CHAR, DOORBELL_COLL_DT_INT8);
    map_dtype(MPI_UNSIGNED_CHAR, DOORBELL_COLL_DT_UINT8);
    map_dtype(MPI_SHORT, int_of(sizeof(short), 1));
    map_dtype(MPI_UNSIGNED_SHORT, int_of(sizeof(short), 0));
    map_dtype(MPI_INT, int_of(sizeof(int), 1));
    map_dtype(MPI_UNSIGNED, int_of(sizeof(int), 0));
    map_dtype(MPI_LONG, int_of(sizeof(long), 1));
    map_dtype(MPI_UNSIGNED_LONG, int_of(sizeof(long), 0));
    map_dtype(MPI_LONG_LONG_INT, int_of(sizeof(long long), 1));
    map_dtype(MPI_UNSIGNED_LONG_LONG, int_of(sizeof(long long), 0));
    map_dtype(MPI_INT8_T, DOORBELL_COLL_DT_INT8);
    map_dtype(MPI_UINT8_T, DOORBELL_COLL_DT_UINT8);
    map_dtype(MPI_INT16_T, DOORBELL_COLL_DT_INT16);
    map_dtype(MPI_UINT16_T, DOORBELL_COLL_DT_UINT16);
    map_dtype(MPI_INT32_T, DOORBELL_COLL_DT_INT32);
    map_dtype(MPI_UINT32_T, DOORBELL_COLL_DT_UINT32);
    map_dtype(MPI_INT64_T, DOORBELL_COLL_DT_INT64);
    map_dtype(MPI_UINT64_T, DOORBELL_COLL_DT_UINT64);
    map_dtype(MPI_AINT, int_of(sizeof(MPI_Aint), 1));
    map_dtype(MPI_OFFSET, int_of(sizeof(MPI_Offset), 1));
    map_dtype(MPI_COUNT, int_of(sizeof(MPI_Count), 1));
    /* floating point, complex, logical, byte */
    map_dtype(MPI_FLOAT, DOORBELL_COLL_DT_FLOAT);
    map_dtype(MPI_DOUBLE, DOORBELL_COLL_DT_DOUBLE);
    map_dtype(MPI_LONG_DOUBLE, DOORBELL_COLL_DT_LONG_DOUBLE);
    map_dtype(MPI_C_FLOAT_COMPLEX, DOORBELL_COLL_DT_FLOAT_COMPLEX);
    map_dtype(MPI_C_DOUBLE_COMPLEX, DOORBELL_COLL_DT_DOUBLE_COMPLEX);
    map_dtype(MPI_C_LONG_DOUBLE_COMPLEX, DOORBELL_COLL_DT_LONG_DOUBLE_COMPLEX);
    map_dtype(MPI_C_BOOL, DOORBELL_COLL_DT_BOOL);
    map_dtype(MPI_CXX_BOOL, DOORBELL_COLL_DT_BOOL);
    map_dtype(MPI_CXX_FLOAT_COMPLEX, DOORBELL_COLL_DT_FLOAT_COMPLEX);
    map_dtype(MPI_CXX_DOUBLE_COMPLEX, DOORBELL_COLL_DT_DOUBLE_COMPLEX);
    map_dtype(MPI_CXX_LONG_DOUBLE_COMPLEX,
              DOORBELL_COLL_DT_LONG_DOUBLE_COMPLEX);
    map_dtype(MPI_BYTE, DOORBELL_COLL_DT_BYTE);
    /* value/index pairs */
    map_dtype(MPI_FLOAT_INT, DOORBELL_COLL_DT_FLOAT_INT);
    map_dtype(MPI_DOUBLE_INT, DOORBELL_COLL_DT_DOUBLE_INT);
    map_dtype(MPI_LONG_INT, DOORBELL_COLL_DT_LONG_INT);
    map_dtype(MPI_2INT, DOORBELL_COLL_DT_2INT);
    map_dtype(MPI_SHORT_INT, DOORBELL_COLL_DT_SHORT_INT);
    map_dtype(MPI_LONG_DOUBLE_INT, DOORBELL_COLL_DT_LONG_DOUBLE_INT);
    /* Fortran (sizes checked through the extent) */
    map_dtype(MPI_INTEGER, DOORBELL_COLL_DT_INT32);
    map_dtype(MPI_INTEGER, DOORBELL_COLL_DT_INT64);
    map_dtype(MPI_REAL, DOORBELL_COLL_DT_FLOAT);
    map_dtype(MPI_DOUBLE_PRECISION, DOORBELL_COLL_DT_DOUBLE);
    map_dtype(MPI_COMPLEX, DOORBELL_COLL_DT_FLOAT_COMPLEX);
    map_dtype(MPI_DOUBLE_COMPLEX, DOORBELL_COLL_DT_DOUBLE_COMPLEX);
    map_dtype(MPI_LOGICAL, DOORBELL_COLL_DT_LOGICAL);
    map_dtype(MPI_2INTEGER, DOORBELL_COLL_DT_2INT);
    map_dtype(MPI_2REAL, DOORBELL_COLL_DT_2FLOAT);
    map_dtype(MPI_2DOUBLE_PRECISION, DOORBELL_COLL_DT_2DOUBLE);
#if OMPI_HAVE_FORTRAN_INTEGER1
    map_dtype(MPI_INTEGER1, DOORBELL_COLL_DT_INT8);
#endif
#if OMPI_HAVE_FORTRAN_INTEGER2
    map_dtype(MPI_INTEGER2, DOORBELL_COLL_DT_INT16);
#endif
#if OMPI_HAVE_FORTRAN_INTEGER4
    map_dtype(MPI_INTEGER4, DOORBELL_COLL_DT_INT32);
#endif
#if OMPI_HAVE_FORTRAN_INTEGER8
    map_dtype(MPI_INTEGER8, DOORBELL_COLL_DT_INT64);
#endif
#if OMPI_HAVE_FORTRAN_REAL4
    map_dtype(MPI_REAL4, DOORBELL_COLL_DT_FLOAT);
#endif
#if OMPI_HAVE_FORTRAN_REAL8
    map_dtype(MPI_REAL8, DOORBELL_COLL_DT_DOUBLE);
#endif
}

int mca_coll_doorbell_dtype(struct ompi_datatype_t *dtype,
                            doorbell_coll_dtype_t  *dt_p)
{
    int i;

    if (dtype_map_len < 0) {
        build_dtype_map();
    }
    for (i = 0; i < dtype_map_len; i++) {
        if (dtype_map[i].mpi == dtype) {
            *dt_p = dtype_map[i].dt;
            return OMPI_SUCCESS;
        }
    }
    return OMPI_ERR_NOT_SUPPORTED;
}

int mca_coll_doorbell_op(struct ompi_op_t *op, doorbell_coll_op_t *op_p)
{
    const struct {
        MPI_Op             mpi;
        doorbell_coll_op_t op;
    } map[] = {
        {MPI_SUM, DOORBELL_COLL_OP_SUM},
        {MPI_PROD, DOORBELL_COLL_OP_PROD},
        {MPI_MAX, DOORBELL_COLL_OP_MAX},
        {MPI_MIN, DOORBELL_COLL_OP_MIN},
        {MPI_LAND, DOORBELL_COLL_OP_LAND},
        {MPI_LOR, DOORBELL_COLL_OP_LOR},
        {MPI_LXOR, DOORBELL_COLL_OP_LXOR},
        {MPI_BAND, DOORBELL_COLL_OP_BAND},
        {MPI_BOR, DOORBELL_COLL_OP_BOR},
        {MPI_BXOR, DOORBELL_COLL_OP_BXOR},
        {MPI_MAXLOC, DOORBELL_COLL_OP_MAXLOC},
        {MPI_MINLOC, DOORBELL_COLL_OP_MINLOC},
    };
    size_t i;

    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if ((void *)map[i].mpi == (void *)op) {
            *op_p = map[i].op;
            return OMPI_SUCCESS;
        }
    }
    return OMPI_ERR_NOT_SUPPORTED;
}

/* GPU memory, when the application has loaded the CUDA driver: asked of
 * cuPointerGetAttribute (memory type, managed). Probed once per process. */
typedef int (*mca_coll_doorbell_cu_attr_fn_t)(void *data, int attribute,
                                              unsigned long long ptr);

int mca_coll_doorbell_is_device_buffer(const void *buf)
{
    static mca_coll_doorbell_cu_attr_fn_t cu_attr;
    static int                            probed;
    unsigned int                          memtype = 0;
    int                                   managed = 0;
    void                                 *lib;

    if (!probed) {
        probed = 1;
        lib    = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (lib != NULL) {
            cu_attr = (mca_coll_doorbell_cu_attr_fn_t)
                dlsym(lib, "cuPointerGetAttribute");
        }
    }
    if (cu_attr == NULL || buf == NULL || buf == MPI_IN_PLACE) {
        return 0;
    }
    /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2 -> CU_MEMORYTYPE_DEVICE = 2;
     * CU_POINTER_ATTRIBUTE_IS_MANAGED = 8. */
    if (cu_attr(&memtype, 2, (unsigned long long)(uintptr_t)buf) == 0 &&
        memtype == 2) {
        return 1;
    }
    return cu_attr(&managed, 8, (unsigned long long)(uintptr_t)buf) == 0 &&
           managed;
}
