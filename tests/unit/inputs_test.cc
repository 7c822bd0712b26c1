// Input generation (tpu_runner/cpu/inputs.h): a keyed cipher's keystream, deterministic per (key,
// stream), distributed as the task says.
#include "tpu_runner/cpu/inputs.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <vector>

namespace kernelgym {
namespace {

TensorSpec Input(DType dtype, int64_t n, Initializer::Kind kind, double a, double b) {
  TensorSpec spec;
  spec.name = "x";
  spec.dtype = dtype;
  spec.shape = {n};
  spec.init = Initializer{kind, a, b};
  return spec;
}

template <typename T>
std::vector<T> Fill(const TensorSpec& spec, uint64_t seed) {
  std::vector<T> v(static_cast<std::size_t>(spec.NumElements()));
  FillInput(spec, std::as_writable_bytes(std::span<T>(v)), seed);
  return v;
}

template <typename T>
double Mean(const std::vector<T>& v) {
  double s = 0;
  for (T x : v) s += static_cast<double>(x);
  return s / static_cast<double>(v.size());
}

template <typename T>
double StdDev(const std::vector<T>& v) {
  const double m = Mean(v);
  double s = 0;
  for (T x : v) s += (static_cast<double>(x) - m) * (static_cast<double>(x) - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

constexpr int64_t kSamples = 100000;

TEST(FillInput, DeterministicPerSeed) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    const TensorSpec spec = Input(dtype, 4096, Initializer::Kind::kNormal, 0, 1);
    std::vector<std::byte> a(spec.NumBytes()), b(spec.NumBytes());
    FillInput(spec, a, 1234);
    FillInput(spec, b, 1234);
    EXPECT_EQ(a, b) << DTypeName(dtype);
  }
  const TensorSpec ints = Input(DType::kInt32, 4096, Initializer::Kind::kRandInt, 0, 1000);
  EXPECT_EQ(Fill<int32_t>(ints, 99), Fill<int32_t>(ints, 99));
}

TEST(FillInput, DifferentSeedsDiffer) {
  const TensorSpec spec = Input(DType::kFloat32, 4096, Initializer::Kind::kNormal, 0, 1);
  const std::vector<float> a = Fill<float>(spec, 1), b = Fill<float>(spec, 2);
  int same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 10);  // independent draws coincide essentially never

  const TensorSpec ints = Input(DType::kInt64, 4096, Initializer::Kind::kRandInt, 0, 1 << 20);
  const std::vector<int64_t> c = Fill<int64_t>(ints, 1), d = Fill<int64_t>(ints, 2);
  same = 0;
  for (std::size_t i = 0; i < c.size(); ++i) same += c[i] == d[i];
  EXPECT_LT(same, 10);
}

TEST(FillInput, ElementsAreNotAllTheSame) {
  const std::vector<float> v = Fill<float>(Input(DType::kFloat32, 1000, Initializer::Kind::kNormal, 0, 1), 5);
  const std::set<float> distinct(v.begin(), v.end());
  EXPECT_GT(distinct.size(), 990u);
}

TEST(FillInput, NormalMeanAndStd) {
  // Standard error of the mean: 2 / sqrt(1e5) ~ 0.0063; of the std: ~0.0045. Bounds are ~8 sigma.
  const TensorSpec f64 = Input(DType::kFloat64, kSamples, Initializer::Kind::kNormal, 3.0, 2.0);
  const std::vector<double> v = Fill<double>(f64, 42);
  EXPECT_NEAR(Mean(v), 3.0, 0.05);
  EXPECT_NEAR(StdDev(v), 2.0, 0.05);
  // About 68.3% within one std, 95.4% within two.
  int64_t in1 = 0, in2 = 0;
  for (double x : v) {
    in1 += std::fabs(x - 3.0) < 2.0;
    in2 += std::fabs(x - 3.0) < 4.0;
  }
  EXPECT_NEAR(static_cast<double>(in1) / kSamples, 0.6827, 0.01);
  EXPECT_NEAR(static_cast<double>(in2) / kSamples, 0.9545, 0.01);

  const TensorSpec f32 = Input(DType::kFloat32, kSamples, Initializer::Kind::kNormal, -1.0, 0.5);
  const std::vector<float> w = Fill<float>(f32, 7);
  EXPECT_NEAR(Mean(w), -1.0, 0.02);
  EXPECT_NEAR(StdDev(w), 0.5, 0.02);
  for (float x : w) ASSERT_TRUE(std::isfinite(x));
}

// The largest distance between the sample's CDF and the standard normal's (Kolmogorov-Smirnov).
template <typename T>
double KolmogorovSmirnovToNormal(std::vector<T> v, double mean, double std) {
  std::sort(v.begin(), v.end());
  const double n = static_cast<double>(v.size());
  double worst = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double cdf = 0.5 * std::erfc(-(static_cast<double>(v[i]) - mean) / std / std::sqrt(2.0));
    worst = std::max({worst, std::fabs(cdf - static_cast<double>(i) / n), std::fabs(cdf - static_cast<double>(i + 1) / n)});
  }
  return worst;
}

// The ziggurat sampler (float64 one draw a word, float32 two) against the normal's CDF, body and
// tails: a wrong layer table, a lost sign or a broken tail moves the KS distance or the tail mass
// far past these bounds (the KS critical value at 1e-6 for n = 2e5 is ~0.0059).
TEST(FillInput, NormalFollowsTheNormalCdfIncludingTheTails) {
  constexpr int64_t n = 200000;
  const std::vector<double> d = Fill<double>(Input(DType::kFloat64, n, Initializer::Kind::kNormal, 0.0, 1.0), 99);
  const std::vector<float> f = Fill<float>(Input(DType::kFloat32, n, Initializer::Kind::kNormal, 0.0, 1.0), 99);
  EXPECT_LT(KolmogorovSmirnovToNormal(d, 0.0, 1.0), 0.006);
  EXPECT_LT(KolmogorovSmirnovToNormal(f, 0.0, 1.0), 0.006);
  // Beyond the ziggurat's base (r = 3.44): P(|x| > 3.44) = 5.8e-4, ~115 of 2e5 (sd ~11); beyond 4: 6.3e-5.
  for (const auto& tail : {std::pair{3.442619855899, 115.0}, std::pair{4.0, 12.7}}) {
    const auto beyond_d = std::count_if(d.begin(), d.end(), [&](double x) { return std::fabs(x) > tail.first; });
    const auto beyond_f = std::count_if(f.begin(), f.end(), [&](float x) { return std::fabs(x) > tail.first; });
    EXPECT_NEAR(static_cast<double>(beyond_d), tail.second, 6 * std::sqrt(tail.second) + 2) << "beyond " << tail.first;
    EXPECT_NEAR(static_cast<double>(beyond_f), tail.second, 6 * std::sqrt(tail.second) + 2) << "beyond " << tail.first;
  }
  // Symmetric: as many draws below zero as above.
  const auto negative = std::count_if(f.begin(), f.end(), [](float x) { return x < 0; });
  EXPECT_NEAR(static_cast<double>(negative), n / 2.0, 6 * std::sqrt(n / 4.0));
}

TEST(FillInput, UniformWithinLowHigh) {
  const TensorSpec f64 = Input(DType::kFloat64, kSamples, Initializer::Kind::kUniform, -2.0, 5.0);
  const std::vector<double> v = Fill<double>(f64, 11);
  for (double x : v) {
    ASSERT_GE(x, -2.0);
    ASSERT_LT(x, 5.0);
  }
  EXPECT_NEAR(Mean(v), 1.5, 0.05);
  EXPECT_NEAR(StdDev(v), 7.0 / std::sqrt(12.0), 0.05);
  EXPECT_LT(*std::min_element(v.begin(), v.end()), -1.99);
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 4.99);

  const TensorSpec f32 = Input(DType::kFloat32, kSamples, Initializer::Kind::kUniform, 0.5, 1.5);
  const std::vector<float> w = Fill<float>(f32, 12);
  for (float x : w) {
    ASSERT_GE(x, 0.5f);
    ASSERT_LT(x, 1.5f);
  }
  EXPECT_NEAR(Mean(w), 1.0, 0.01);
  EXPECT_NEAR(StdDev(w), 1.0 / std::sqrt(12.0), 0.01);
  // Flat: each tenth of [0.5, 1.5) holds a tenth of the draws (the float32 fast path draws its
  // own words, four streams side by side).
  std::vector<int> tenths(10);
  for (float x : w) ++tenths[std::min(9, static_cast<int>((x - 0.5f) * 10))];
  for (int count : tenths) EXPECT_NEAR(count, kSamples / 10.0, 6 * std::sqrt(kSamples / 10.0));
}

TEST(FillInput, Float32UniformNeverReachesHigh) {
  const TensorSpec spec = Input(DType::kFloat32, 1000, Initializer::Kind::kUniform, 16777216.0, 16777218.0);
  const std::vector<float> v = Fill<float>(spec, 3);
  for (float x : v) ASSERT_LT(x, 16777218.0f);
  // The realistic case: a silu_mul-sized U[-2, 2) float32 input, seed 0.
  const TensorSpec b = Input(DType::kFloat32, 1048576, Initializer::Kind::kUniform, -2.0, 2.0);
  for (float x : Fill<float>(b, 0)) ASSERT_LT(x, 2.0f);
}

TEST(FillInput, RandIntIntegerRange) {
  const TensorSpec i32 = Input(DType::kInt32, 10000, Initializer::Kind::kRandInt, -3, 5);
  const std::vector<int32_t> v = Fill<int32_t>(i32, 21);
  std::set<int32_t> seen;
  for (int32_t x : v) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 5);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 8u);  // every value in [-3, 5) occurs
  EXPECT_NEAR(Mean(v), 0.5, 0.1);

  const int64_t base = int64_t{1} << 40;
  const TensorSpec i64 = Input(DType::kInt64, 10000, Initializer::Kind::kRandInt, static_cast<double>(base),
                               static_cast<double>(base + 10));
  std::set<int64_t> seen64;
  for (int64_t x : Fill<int64_t>(i64, 22)) {
    ASSERT_GE(x, base);
    ASSERT_LT(x, base + 10);
    seen64.insert(x);
  }
  EXPECT_EQ(seen64.size(), 10u);

  const TensorSpec two = Input(DType::kInt32, 1000, Initializer::Kind::kRandInt, 0, 2);
  std::set<int32_t> bits;
  for (int32_t x : Fill<int32_t>(two, 23)) bits.insert(x);
  EXPECT_EQ(bits, (std::set<int32_t>{0, 1}));
}

TEST(FillInput, FillsMultiDimensionalTensorsCompletely) {
  TensorSpec spec = Input(DType::kFloat64, 1, Initializer::Kind::kUniform, 1.0, 2.0);
  spec.shape = {3, 5, 7};
  std::vector<double> v(105, 0.0);
  FillInput(spec, std::as_writable_bytes(std::span<double>(v)), 8);
  for (double x : v) EXPECT_GE(x, 1.0);  // no element left at 0
}

TEST(FillInput, UniformWithAStepStaysOnTheGrid) {
  TensorSpec spec = Input(DType::kFloat32, 10000, Initializer::Kind::kUniform, -1.0, 1.0);
  spec.init->step = 0.125;  // 16 points: -1, -0.875, ..., 0.875
  const std::vector<float> v = Fill<float>(spec, 9);
  const std::set<float> distinct(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), 16u);
  EXPECT_EQ(*distinct.begin(), -1.0f);
  EXPECT_EQ(*distinct.rbegin(), 0.875f);
  for (float x : v) ASSERT_EQ(x * 8, std::round(x * 8)) << x;
}

TEST(FillInput, PermutationIsDistinctValuesFromItsRange) {
  const TensorSpec whole = Input(DType::kInt32, 1000, Initializer::Kind::kPermutation, 0, 1000);
  std::vector<int32_t> v = Fill<int32_t>(whole, 3);
  EXPECT_NE(v, Fill<int32_t>(whole, 4));
  EXPECT_FALSE(std::is_sorted(v.begin(), v.end()));
  std::sort(v.begin(), v.end());
  for (int32_t i = 0; i < 1000; ++i) ASSERT_EQ(v[i], i);  // exactly 0 .. 999

  const TensorSpec pool = Input(DType::kInt64, 100, Initializer::Kind::kPermutation, 0, 400);
  const std::vector<int64_t> w = Fill<int64_t>(pool, 5);
  const std::set<int64_t> distinct(w.begin(), w.end());
  EXPECT_EQ(distinct.size(), 100u);
  EXPECT_GE(*distinct.begin(), 0);
  EXPECT_LT(*distinct.rbegin(), 400);
  EXPECT_GT(*distinct.rbegin(), 100);  // drawn from the whole pool, not its first 100
}

TEST(FillInput, PartitionSumsToTheTotalWithVaryingParts) {
  const TensorSpec groups = Input(DType::kInt32, 16, Initializer::Kind::kPartition, 0, 1024);
  for (uint64_t seed : {1, 2, 3}) {
    const std::vector<int32_t> v = Fill<int32_t>(groups, seed);
    int64_t sum = 0;
    for (int32_t x : v) {
      EXPECT_GE(x, 0);
      sum += x;
    }
    EXPECT_EQ(sum, 1024);
    EXPECT_GT(*std::max_element(v.begin(), v.end()), *std::min_element(v.begin(), v.end()));
  }
  EXPECT_NE(Fill<int32_t>(groups, 1), Fill<int32_t>(groups, 2));
}

TEST(RefreshInput, StructuredInputsAreRedrawnWholeAndStayValid) {
  const TensorSpec perm = Input(DType::kInt32, 64, Initializer::Kind::kPermutation, 0, 64);
  std::vector<int32_t> p = Fill<int32_t>(perm, 1);
  const std::vector<int32_t> before = p;
  RefreshInput(perm, std::as_writable_bytes(std::span<int32_t>(p)), 2, 0.01);
  EXPECT_NE(p, before);
  EXPECT_EQ(std::set<int32_t>(p.begin(), p.end()).size(), 64u);  // a partial redraw would repeat values

  const TensorSpec part = Input(DType::kInt64, 8, Initializer::Kind::kPartition, 0, 500);
  std::vector<int64_t> q = Fill<int64_t>(part, 1);
  RefreshInput(part, std::as_writable_bytes(std::span<int64_t>(q)), 2, 0.01);
  int64_t sum = 0;
  for (int64_t x : q) sum += x;
  EXPECT_EQ(sum, 500);
}

TEST(RefreshInput, ChangesSomeButNotAllElements) {
  const TensorSpec spec = Input(DType::kFloat32, 10000, Initializer::Kind::kNormal, 0, 1);
  const std::vector<float> original = Fill<float>(spec, 100);
  std::vector<float> refreshed = original;
  RefreshInput(spec, std::as_writable_bytes(std::span<float>(refreshed)), 200, 0.1);
  int changed = 0;
  for (std::size_t i = 0; i < original.size(); ++i) changed += original[i] != refreshed[i];
  // 1000 draws at random positions (with repeats): ~950 distinct elements.
  EXPECT_GT(changed, 500);
  EXPECT_LT(changed, 1500);
  // Redrawn values come from the same distribution.
  EXPECT_NEAR(Mean(refreshed), Mean(original), 0.05);
}

TEST(RefreshInput, DeterministicPerSeedAndDifferentAcrossSeeds) {
  const TensorSpec spec = Input(DType::kFloat64, 5000, Initializer::Kind::kUniform, -1, 1);
  const std::vector<double> original = Fill<double>(spec, 1);
  std::vector<double> a = original, b = original, c = original;
  RefreshInput(spec, std::as_writable_bytes(std::span<double>(a)), 77, 0.05);
  RefreshInput(spec, std::as_writable_bytes(std::span<double>(b)), 77, 0.05);
  RefreshInput(spec, std::as_writable_bytes(std::span<double>(c)), 78, 0.05);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, original);
  for (double x : a) {
    ASSERT_GE(x, -1);
    ASSERT_LT(x, 1);
  }
}

TEST(RefreshInput, TinyFractionStillChangesOneElement) {
  const TensorSpec spec = Input(DType::kFloat64, 1000, Initializer::Kind::kNormal, 0, 1);
  const std::vector<double> original = Fill<double>(spec, 5);
  std::vector<double> refreshed = original;
  RefreshInput(spec, std::as_writable_bytes(std::span<double>(refreshed)), 6, 1e-9);
  int changed = 0;
  for (std::size_t i = 0; i < original.size(); ++i) changed += original[i] != refreshed[i];
  EXPECT_EQ(changed, 1);
}

TEST(Rng, DeterministicAndInRange) {
  Rng a(2024), b(2024), c(2025);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.Next(), y = b.Next(), z = c.Next();
    ASSERT_EQ(x, y);
    differs |= x != z;
  }
  EXPECT_TRUE(differs);
  Rng r(1);
  double sum = 0;
  for (int i = 0; i < kSamples; ++i) {
    const double u = r.Uniform01();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / kSamples, 0.5, 0.01);
}

// The random words are AES-256's encryption of the counter blocks (stream, part, 0), (stream,
// part, 1), ...: computed here block by block with the plain block cipher (ECB), not CTR mode.
// A generator that is not this keyed cipher (a fast non-cryptographic one can be run backwards
// from the values it drew) fails here.
TEST(Rng, IsTheAes256KeystreamOfItsCounterBlocks) {
  InputKey key;
  for (std::size_t i = 0; i < key.bytes.size(); ++i) key.bytes[i] = static_cast<unsigned char>(17 * i + 3);
  const uint64_t stream = 0x0123456789abcdefULL;
  const uint32_t part = 0xa5a5f00d;
  Rng rng(key, stream, part);
  EVP_CIPHER_CTX* ecb = EVP_CIPHER_CTX_new();
  ASSERT_EQ(EVP_EncryptInit_ex(ecb, EVP_aes_256_ecb(), nullptr, key.bytes.data(), nullptr), 1);
  EVP_CIPHER_CTX_set_padding(ecb, 0);
  for (uint32_t block = 0; block < 40; ++block) {  // past the generator's 512-byte refills
    unsigned char counter[16], expected[16];
    for (int i = 0; i < 8; ++i) counter[i] = static_cast<unsigned char>(stream >> (56 - 8 * i));
    for (int i = 0; i < 4; ++i) counter[8 + i] = static_cast<unsigned char>(part >> (24 - 8 * i));
    for (int i = 0; i < 4; ++i) counter[12 + i] = static_cast<unsigned char>(block >> (24 - 8 * i));
    int len = 0;
    ASSERT_EQ(EVP_EncryptUpdate(ecb, expected, &len, counter, 16), 1);
    uint64_t words[2];
    std::memcpy(words, expected, 16);
    EXPECT_EQ(rng.Next(), words[0]) << "block " << block;
    EXPECT_EQ(rng.Next(), words[1]) << "block " << block;
  }
  EVP_CIPHER_CTX_free(ecb);
}

// The same stream under another key: other values everywhere (what the judge's per-evaluation
// key does to a policy that knows the seeds), the same key again: the same values.
TEST(FillInput, TheKeyChangesEveryValueOfAStream) {
  InputKey one, two;
  ASSERT_TRUE(InputKey::Draw(one));
  ASSERT_TRUE(InputKey::Draw(two));
  EXPECT_NE(one.bytes, two.bytes);
  EXPECT_NE(one.bytes, InputKey{}.bytes);
  for (const TensorSpec& spec : {Input(DType::kFloat32, 4096, Initializer::Kind::kNormal, 0, 1),
                                 Input(DType::kFloat32, 4096, Initializer::Kind::kUniform, -1, 1),
                                 Input(DType::kFloat64, 4096, Initializer::Kind::kNormal, 0, 1)}) {
    std::vector<std::byte> a(spec.NumBytes()), b(spec.NumBytes()), again(spec.NumBytes()), public_key(spec.NumBytes());
    FillInput(spec, a, one, 77);
    FillInput(spec, b, two, 77);
    FillInput(spec, again, one, 77);
    FillInput(spec, public_key, 77);
    EXPECT_EQ(a, again);
    const std::size_t width = DTypeSize(spec.dtype);
    int same = 0, same_public = 0;
    for (std::size_t i = 0; i < a.size(); i += width) {
      same += std::memcmp(&a[i], &b[i], width) == 0;
      same_public += std::memcmp(&a[i], &public_key[i], width) == 0;
    }
    EXPECT_LT(same, 10) << DTypeName(spec.dtype);
    EXPECT_LT(same_public, 10) << DTypeName(spec.dtype);
  }
}

TEST(MixSeed, DistinctStreamsAndBases) {
  std::set<uint64_t> seeds;
  for (uint64_t base : {0ull, 1ull, 12345ull})
    for (uint64_t stream = 0; stream < 100; ++stream) seeds.insert(MixSeed(base, stream));
  EXPECT_EQ(seeds.size(), 300u);
  EXPECT_EQ(MixSeed(7, 3), MixSeed(7, 3));
}

}  // namespace
}  // namespace kernelgym
