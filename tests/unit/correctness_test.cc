// Output comparison and poisoning (tpu_runner/correctness.h).
#include "tpu_runner/correctness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

namespace kernelgym {
namespace {

TensorSpec Spec(DType dtype, std::vector<int64_t> shape, double atol = 0, double rtol = 0) {
  TensorSpec spec;
  spec.name = "y";
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.tolerance = {atol, rtol};
  return spec;
}

template <typename T>
std::span<const std::byte> Bytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

template <typename T>
OutputCheck Compare(const TensorSpec& spec, const std::vector<T>& expected, const std::vector<T>& actual) {
  return CompareOutput(spec, Bytes(expected), Bytes(actual));
}

TEST(CompareOutput, IdenticalOutputsPass) {
  const TensorSpec spec = Spec(DType::kFloat32, {2, 3}, 1e-5, 1e-4);
  const std::vector<float> v{1.5f, -2.0f, 0.0f, 3.25f, 1e-8f, -1e8f};
  const OutputCheck c = Compare(spec, v, v);
  EXPECT_TRUE(c.passed());
  EXPECT_EQ(c.output, "y");
  EXPECT_EQ(c.elements, 6);
  EXPECT_EQ(c.mismatches, 0);
  EXPECT_EQ(c.non_finite, 0);
  EXPECT_EQ(c.first_mismatch, -1);
  EXPECT_TRUE(c.first_mismatch_index.empty());
  EXPECT_EQ(c.max_abs_error, 0);
  EXPECT_EQ(c.max_rel_error, 0);
}

TEST(CompareOutput, ToleranceBoundaryIsInclusive) {
  // |a - e| <= atol + rtol * |e|: e = 2, atol = 0.5, rtol = 0.25 -> allowed error 1 (exact in binary).
  const TensorSpec spec = Spec(DType::kFloat64, {4}, 0.5, 0.25);
  const std::vector<double> expected{2.0, 2.0, -2.0, -2.0};
  const OutputCheck at = Compare(spec, expected, std::vector<double>{3.0, 1.0, -3.0, -1.0});
  EXPECT_TRUE(at.passed()) << at.mismatches;
  EXPECT_DOUBLE_EQ(at.max_abs_error, 1.0);
  EXPECT_DOUBLE_EQ(at.max_rel_error, 0.5);

  const OutputCheck beyond = Compare(spec, expected, std::vector<double>{std::nextafter(3.0, 4.0), 2.0, -2.0, -0.999});
  EXPECT_EQ(beyond.mismatches, 2);
  EXPECT_EQ(beyond.first_mismatch, 0);
  EXPECT_EQ(beyond.non_finite, 0);
}

TEST(CompareOutput, RelativeToleranceScalesWithExpected) {
  const TensorSpec spec = Spec(DType::kFloat32, {3}, 1e-6, 1e-3);
  // 1e6 * 1e-3 = 1000 allowed: off by 500 passes; near zero only atol counts.
  EXPECT_TRUE(Compare(spec, std::vector<float>{1e6f, 0, 1}, std::vector<float>{1e6f + 500, 0, 1}).passed());
  const OutputCheck near_zero = Compare(spec, std::vector<float>{1e6f, 0, 1}, std::vector<float>{1e6f, 1e-4f, 1});
  EXPECT_EQ(near_zero.mismatches, 1);
  EXPECT_EQ(near_zero.first_mismatch, 1);
  EXPECT_FLOAT_EQ(static_cast<float>(near_zero.actual), 1e-4f);
  EXPECT_EQ(near_zero.expected, 0.0);
}

TEST(CompareOutput, OutsideToleranceCountsEveryMismatchAndRecordsTheFirst) {
  const TensorSpec spec = Spec(DType::kFloat32, {8}, 1e-5, 1e-4);
  const std::vector<float> expected{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> actual = expected;
  actual[2] = 3.1f;
  actual[5] = 5.0f;
  actual[7] = -8.0f;
  const OutputCheck c = Compare(spec, expected, actual);
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.mismatches, 3);
  EXPECT_EQ(c.first_mismatch, 2);
  EXPECT_EQ(c.first_mismatch_index, (std::vector<int64_t>{2}));
  EXPECT_DOUBLE_EQ(c.expected, 3.0);
  EXPECT_DOUBLE_EQ(c.actual, static_cast<double>(3.1f));
  EXPECT_DOUBLE_EQ(c.max_abs_error, 16.0);
  EXPECT_DOUBLE_EQ(c.max_rel_error, 2.0);
  EXPECT_EQ(c.non_finite, 0);
}

TEST(CompareOutput, FirstMismatchMultiIndexIsRowMajor) {
  const TensorSpec spec = Spec(DType::kFloat64, {2, 3, 4}, 1e-9, 1e-9);
  std::vector<double> expected(24);
  for (int i = 0; i < 24; ++i) expected[i] = i;
  std::vector<double> actual = expected;
  actual[17] += 1;  // 17 = 1*12 + 1*4 + 1
  actual[23] += 1;
  OutputCheck c = Compare(spec, expected, actual);
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.first_mismatch, 17);
  EXPECT_EQ(c.first_mismatch_index, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_DOUBLE_EQ(c.expected, 17);
  EXPECT_DOUBLE_EQ(c.actual, 18);

  actual = expected;
  actual[23] = -1;  // the last element: {1, 2, 3}
  c = Compare(spec, expected, actual);
  EXPECT_EQ(c.first_mismatch, 23);
  EXPECT_EQ(c.first_mismatch_index, (std::vector<int64_t>{1, 2, 3}));

  actual = expected;
  actual[0] = 100;  // the first element: {0, 0, 0}
  c = Compare(spec, expected, actual);
  EXPECT_EQ(c.first_mismatch, 0);
  EXPECT_EQ(c.first_mismatch_index, (std::vector<int64_t>{0, 0, 0}));

  const TensorSpec tall = Spec(DType::kFloat32, {5, 1, 7}, 1e-6, 1e-6);
  std::vector<float> e(35, 1.0f), a(35, 1.0f);
  a[30] = 2.0f;  // 30 = 4*7 + 0*7 + 2
  c = Compare(tall, e, a);
  EXPECT_EQ(c.first_mismatch_index, (std::vector<int64_t>{4, 0, 2}));
}

TEST(CompareOutput, NanPoisonCountsAsNonFinite) {
  const TensorSpec spec = Spec(DType::kFloat32, {4, 4}, 1e-5, 1e-4);
  std::vector<float> expected(16);
  for (int i = 0; i < 16; ++i) expected[i] = 0.5f * i - 3.0f;
  std::vector<float> actual(16);
  FillPoison(DType::kFloat32, std::as_writable_bytes(std::span<float>(actual)), 0);
  const OutputCheck c = Compare(spec, expected, actual);
  EXPECT_EQ(c.mismatches, 16);
  EXPECT_EQ(c.non_finite, 16);
  EXPECT_EQ(c.first_mismatch, 0);
  EXPECT_TRUE(std::isnan(c.actual));
  EXPECT_TRUE(std::isinf(c.max_abs_error));

  // A kernel that wrote all but one element: one poison value left behind.
  std::vector<float> partial = expected;
  partial[9] = std::numeric_limits<float>::quiet_NaN();
  const OutputCheck p = Compare(spec, expected, partial);
  EXPECT_EQ(p.mismatches, 1);
  EXPECT_EQ(p.non_finite, 1);
  EXPECT_EQ(p.first_mismatch_index, (std::vector<int64_t>{2, 1}));
}

TEST(CompareOutput, FinitePoisonIsAMismatchButNotNonFinite) {
  const TensorSpec spec = Spec(DType::kFloat64, {3}, 1e-5, 1e-4);
  const std::vector<double> expected{1, 2, 3};
  std::vector<double> actual(3);
  FillPoison(DType::kFloat64, std::as_writable_bytes(std::span<double>(actual)), 1);
  const OutputCheck c = Compare(spec, expected, actual);
  EXPECT_EQ(c.mismatches, 3);
  EXPECT_EQ(c.non_finite, 0);
}

TEST(CompareOutput, NonFiniteExpectedValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const TensorSpec spec = Spec(DType::kFloat64, {6}, 1e-5, 1e-4);
  // NaN == NaN and inf == inf pass.
  EXPECT_TRUE(Compare(spec, std::vector<double>{nan, inf, -inf, 1, 2, 3}, std::vector<double>{nan, inf, -inf, 1, 2, 3})
                  .passed());
  // Expected inf but got a finite value or the other infinity: mismatch, not counted as poison.
  const OutputCheck c =
      Compare(spec, std::vector<double>{inf, -inf, nan, 1, 2, 3}, std::vector<double>{1e308, inf, 0, 1, 2, 3});
  EXPECT_EQ(c.mismatches, 3);
  EXPECT_EQ(c.non_finite, 0);
  // Expected finite but got inf: poison-like.
  const OutputCheck d =
      Compare(spec, std::vector<double>{1, 2, 3, 4, 5, 6}, std::vector<double>{1, 2, inf, 4, 5, -inf});
  EXPECT_EQ(d.mismatches, 2);
  EXPECT_EQ(d.non_finite, 2);
  EXPECT_EQ(d.first_mismatch, 2);
}

TEST(CompareOutput, IntegerDtypesCompareExactly) {
  // A huge tolerance does not make integers approximate.
  const TensorSpec i32 = Spec(DType::kInt32, {5}, 100, 1);
  const std::vector<int32_t> e32{0, -5, 7, 2147483647, -2147483647 - 1};
  EXPECT_TRUE(Compare(i32, e32, e32).passed());
  std::vector<int32_t> a32 = e32;
  a32[2] = 8;
  OutputCheck c = Compare(i32, e32, a32);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.first_mismatch, 2);
  EXPECT_DOUBLE_EQ(c.expected, 7);
  EXPECT_DOUBLE_EQ(c.actual, 8);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 1);
  EXPECT_EQ(c.non_finite, 0);

  const TensorSpec i64 = Spec(DType::kInt64, {2, 2}, 1, 1);
  const std::vector<int64_t> e64{1, 2, 3, int64_t{1} << 40};
  std::vector<int64_t> a64 = e64;
  a64[3] += 1;
  c = Compare(i64, e64, a64);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.first_mismatch_index, (std::vector<int64_t>{1, 1}));
  a64 = e64;
  a64[0] = -1;
  EXPECT_EQ(Compare(i64, e64, a64).mismatches, 1);
}

TEST(CompareOutput, Int64BeyondDoublePrecisionComparesExactly) {
  const TensorSpec spec = Spec(DType::kInt64, {2});
  const std::vector<int64_t> expected{(int64_t{1} << 53) + 1, -((int64_t{1} << 62) + 1)};
  const std::vector<int64_t> actual{int64_t{1} << 53, -(int64_t{1} << 62)};
  const OutputCheck c = Compare(spec, expected, actual);
  EXPECT_EQ(c.mismatches, 2);
  EXPECT_EQ(c.first_mismatch, 0);
}

TEST(CompareOutput, SizeMismatchFailsEveryElement) {
  const TensorSpec spec = Spec(DType::kFloat32, {2, 4}, 1e-5, 1e-4);
  const std::vector<float> full(8, 1.0f), short_buffer(7, 1.0f), long_buffer(9, 1.0f);
  OutputCheck c = Compare(spec, full, short_buffer);
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.elements, 8);
  EXPECT_EQ(c.mismatches, 8);
  EXPECT_EQ(c.first_mismatch, 0);
  c = Compare(spec, short_buffer, full);
  EXPECT_EQ(c.mismatches, 8);
  c = Compare(spec, full, long_buffer);
  EXPECT_EQ(c.mismatches, 8);
  // float64 data checked against a float32 spec: twice the bytes.
  const std::vector<double> doubles(8, 1.0);
  c = CompareOutput(spec, Bytes(full), Bytes(doubles));
  EXPECT_EQ(c.mismatches, 8);
}

TEST(FillPoison, FloatVariants) {
  std::vector<float> f(5, 0.0f);
  auto fb = std::as_writable_bytes(std::span<float>(f));
  FillPoison(DType::kFloat32, fb, 0);
  for (float x : f) EXPECT_TRUE(std::isnan(x));
  FillPoison(DType::kFloat32, fb, 1);
  for (float x : f) {
    EXPECT_TRUE(std::isfinite(x));
    EXPECT_EQ(x, f[0]);
    EXPECT_GT(std::fabs(x), 1e30f);
  }
  std::vector<double> d(5, 0.0);
  auto db = std::as_writable_bytes(std::span<double>(d));
  FillPoison(DType::kFloat64, db, 0);
  for (double x : d) EXPECT_TRUE(std::isnan(x));
  FillPoison(DType::kFloat64, db, 1);
  for (double x : d) {
    EXPECT_TRUE(std::isfinite(x));
    EXPECT_GT(std::fabs(x), 1e200);
  }
}

TEST(FillPoison, IntegerVariantsDifferAndFillEveryElement) {
  std::vector<int32_t> a(7, 0), b(7, 0);
  FillPoison(DType::kInt32, std::as_writable_bytes(std::span<int32_t>(a)), 0);
  FillPoison(DType::kInt32, std::as_writable_bytes(std::span<int32_t>(b)), 1);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(a[i], a[0]);
    EXPECT_EQ(b[i], b[0]);
  }
  EXPECT_NE(a[0], 0);
  EXPECT_NE(b[0], 0);
  EXPECT_NE(a[0], b[0]);

  std::vector<int64_t> c(3, 0), d(3, 0);
  FillPoison(DType::kInt64, std::as_writable_bytes(std::span<int64_t>(c)), 0);
  FillPoison(DType::kInt64, std::as_writable_bytes(std::span<int64_t>(d)), 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i], c[0]);
    EXPECT_EQ(d[i], d[0]);
  }
  EXPECT_NE(c[0], d[0]);
  EXPECT_NE(c[0], 0);
  // Not a small value a kernel could plausibly produce.
  EXPECT_GT(std::llabs(c[0]), int64_t{1} << 40);
  EXPECT_GT(std::llabs(d[0]), int64_t{1} << 40);
}

TEST(FillPoison, PoisonedOutputNeverPassesAgainstFiniteExpected) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
    for (int variant : {0, 1}) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " variant " + std::to_string(variant));
      const TensorSpec spec = Spec(dtype, {16}, 1e-3, 1e-3);
      std::vector<std::byte> expected(spec.NumBytes(), std::byte{0});  // all zeros
      std::vector<std::byte> actual(spec.NumBytes(), std::byte{0});
      FillPoison(dtype, actual, variant);
      const OutputCheck c = CompareOutput(spec, expected, actual);
      EXPECT_EQ(c.mismatches, 16);
    }
  }
}

}  // namespace
}  // namespace kernelgym

namespace kernelgym {
namespace {

// The timing loop's fast check must agree with CompareOutput on finite data.
TEST(OutputWithinTolerance, AgreesWithCompareOutput) {
  TensorSpec spec;
  spec.name = "y";
  spec.dtype = DType::kFloat32;
  spec.shape = {1000};
  spec.tolerance = {1e-5, 1e-4};
  std::vector<float> expected(1000), actual(1000);
  for (int i = 0; i < 1000; ++i) expected[i] = actual[i] = std::sin(0.37f * i) * 10;
  auto bytes = [](const std::vector<float>& v) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(float));
  };
  EXPECT_TRUE(OutputWithinTolerance(spec, bytes(expected), bytes(actual)));
  actual[500] += 1e-5f + 1e-4f * std::fabs(expected[500]) * 2;  // just outside
  EXPECT_FALSE(OutputWithinTolerance(spec, bytes(expected), bytes(actual)));
  EXPECT_FALSE(CompareOutput(spec, bytes(expected), bytes(actual)).passed());
  actual[500] = std::nanf("");
  EXPECT_FALSE(OutputWithinTolerance(spec, bytes(expected), bytes(actual)));
  actual[500] = expected[500];
  EXPECT_TRUE(OutputWithinTolerance(spec, bytes(expected), bytes(actual)));
  spec.shape = {500};  // a buffer of another size than the spec says is a mismatch
  EXPECT_FALSE(OutputWithinTolerance(spec, bytes(expected), bytes(actual)));
}

}  // namespace
}  // namespace kernelgym
