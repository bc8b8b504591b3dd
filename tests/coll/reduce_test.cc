// Reduction kernels against hand-computed values, and the op/type table.
#include "reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace doorbell::coll;

namespace {

template <class T>
T one(doorbell_coll_dtype_t dt, doorbell_coll_op_t op, T a, T b)
{
    T out;
    reduce(dt, op, &a, &b, &out, 1);
    return out;
}

TEST(CollReduce, ArithmeticAndWraparound)
{
    EXPECT_EQ(one<int32_t>(DOORBELL_COLL_DT_INT32, DOORBELL_COLL_OP_SUM, 7, -9), -2);
    EXPECT_EQ(one<int32_t>(DOORBELL_COLL_DT_INT32, DOORBELL_COLL_OP_SUM, INT32_MAX, 1), INT32_MIN);
    EXPECT_EQ(one<uint16_t>(DOORBELL_COLL_DT_UINT16, DOORBELL_COLL_OP_PROD, 65535, 65535), 1);
    EXPECT_EQ(one<int8_t>(DOORBELL_COLL_DT_INT8, DOORBELL_COLL_OP_MIN, -3, 4), -3);
    EXPECT_EQ(one<uint64_t>(DOORBELL_COLL_DT_UINT64, DOORBELL_COLL_OP_MAX, 1, ~0ull), ~0ull);
    EXPECT_EQ(one<double>(DOORBELL_COLL_DT_DOUBLE, DOORBELL_COLL_OP_PROD, 1.5, -4), -6);
    EXPECT_EQ(one<long double>(DOORBELL_COLL_DT_LONG_DOUBLE, DOORBELL_COLL_OP_SUM, 1.0L, 1e-19L),
              1.0L + 1e-19L);
}

TEST(CollReduce, MaxKeepsTheLowerOperandOnNaN)
{
    double nan = std::nan("1");
    EXPECT_TRUE(std::isnan(one<double>(DOORBELL_COLL_DT_DOUBLE, DOORBELL_COLL_OP_MAX, nan, 1.0)));
    EXPECT_EQ(one<double>(DOORBELL_COLL_DT_DOUBLE, DOORBELL_COLL_OP_MAX, 1.0, nan), 1.0);
}

TEST(CollReduce, LogicalResultsAreZeroOrOne)
{
    EXPECT_EQ(one<int32_t>(DOORBELL_COLL_DT_INT32, DOORBELL_COLL_OP_LAND, 5, -2), 1);
    EXPECT_EQ(one<int32_t>(DOORBELL_COLL_DT_LOGICAL, DOORBELL_COLL_OP_LXOR, 5, 3), 0);
    EXPECT_EQ(one<int32_t>(DOORBELL_COLL_DT_LOGICAL, DOORBELL_COLL_OP_LOR, 0, 9), 1);
    EXPECT_EQ(one<uint8_t>(DOORBELL_COLL_DT_BOOL, DOORBELL_COLL_OP_LAND, 1, 0), 0);
    EXPECT_EQ(one<uint8_t>(DOORBELL_COLL_DT_BYTE, DOORBELL_COLL_OP_BXOR, 0xf0, 0x3c), 0xcc);
}

TEST(CollReduce, ComplexProduct)
{
    struct C {
        double re, im;
    };
    C a{1, 2}, b{3, -1}, out;
    reduce(DOORBELL_COLL_DT_DOUBLE_COMPLEX, DOORBELL_COLL_OP_PROD, &a, &b, &out, 1);
    EXPECT_EQ(out.re, 5);
    EXPECT_EQ(out.im, 5);
}

TEST(CollReduce, LocTiesKeepTheSmallerIndex)
{
    struct P {
        double v;
        int    k;
    };
    P a{2.0, 7}, b{2.0, 3}, c{5.0, 9}, out;
    reduce(DOORBELL_COLL_DT_DOUBLE_INT, DOORBELL_COLL_OP_MAXLOC, &a, &b, &out, 1);
    EXPECT_EQ(out.k, 3);
    reduce(DOORBELL_COLL_DT_DOUBLE_INT, DOORBELL_COLL_OP_MINLOC, &b, &a, &out, 1);
    EXPECT_EQ(out.k, 3);
    reduce(DOORBELL_COLL_DT_DOUBLE_INT, DOORBELL_COLL_OP_MAXLOC, &a, &c, &out, 1);
    EXPECT_EQ(out.v, 5.0);
    EXPECT_EQ(out.k, 9);
    EXPECT_EQ(dtype_size(DOORBELL_COLL_DT_DOUBLE_INT), 16u);
}

TEST(CollReduce, OpTypeTableFollowsTheStandard)
{
    EXPECT_TRUE(op_supported(DOORBELL_COLL_DT_FLOAT, DOORBELL_COLL_OP_SUM));
    EXPECT_FALSE(op_supported(DOORBELL_COLL_DT_FLOAT, DOORBELL_COLL_OP_BAND));
    EXPECT_FALSE(op_supported(DOORBELL_COLL_DT_DOUBLE_COMPLEX, DOORBELL_COLL_OP_MAX));
    EXPECT_FALSE(op_supported(DOORBELL_COLL_DT_BOOL, DOORBELL_COLL_OP_SUM));
    EXPECT_TRUE(op_supported(DOORBELL_COLL_DT_BYTE, DOORBELL_COLL_OP_BOR));
    EXPECT_FALSE(op_supported(DOORBELL_COLL_DT_BYTE, DOORBELL_COLL_OP_SUM));
    EXPECT_FALSE(op_supported(DOORBELL_COLL_DT_INT32, DOORBELL_COLL_OP_MAXLOC));
    EXPECT_TRUE(op_supported(DOORBELL_COLL_DT_2INT, DOORBELL_COLL_OP_MINLOC));
    EXPECT_FALSE(op_supported(DOORBELL_COLL_DT_COUNT, DOORBELL_COLL_OP_SUM));
}

} // namespace
