#include "tpu_runner/inputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

namespace kernelgym {
namespace {

uint64_t SplitMix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

template <typename T>
void Store(std::span<std::byte> buffer, int64_t i, T value) {
  std::memcpy(buffer.data() + i * sizeof(T), &value, sizeof(T));
}

void Draw(const TensorSpec& spec, std::span<std::byte> buffer, int64_t i, Rng& rng) {
  const Initializer& init = *spec.init;
  double v;
  switch (init.kind) {
    case Initializer::Kind::kNormal: v = init.a + init.b * rng.Normal(); break;
    case Initializer::Kind::kUniform:
      if (init.step > 0) {  // one of the grid's points below b, each equally likely
        const auto points = static_cast<uint64_t>(std::ceil((init.b - init.a) / init.step));
        v = init.a + init.step * static_cast<double>(rng.Next() % points);
      } else {
        v = init.a + (init.b - init.a) * rng.Uniform01();
      }
      break;
    case Initializer::Kind::kRandInt:
      v = std::floor(init.a) + static_cast<double>(rng.Next() % static_cast<uint64_t>(std::floor(init.b) - std::floor(init.a)));
      break;
    default: v = 0;
  }
  switch (spec.dtype) {
    case DType::kFloat32: {
      float f = static_cast<float>(v);
      // Rounding to float can land on `high`; uniform promises [low, high).
      if (init.kind == Initializer::Kind::kUniform && f >= static_cast<float>(init.b))
        f = std::nextafter(static_cast<float>(init.b), -INFINITY);
      Store(buffer, i, f);
      break;
    }
    case DType::kFloat64: Store(buffer, i, v); break;
    case DType::kInt32: Store(buffer, i, static_cast<int32_t>(v)); break;
    case DType::kInt64: Store(buffer, i, static_cast<int64_t>(v)); break;
  }
}

void StoreInteger(const TensorSpec& spec, std::span<std::byte> buffer, int64_t i, int64_t value) {
  if (spec.dtype == DType::kInt32)
    Store(buffer, i, static_cast<int32_t>(value));
  else
    Store(buffer, i, value);
}

// Distinct values from [0, high), in random order: a partial Fisher-Yates shuffle.
void DrawPermutation(const TensorSpec& spec, std::span<std::byte> buffer, Rng& rng) {
  const int64_t n = spec.NumElements();
  std::vector<int64_t> pool(static_cast<std::size_t>(spec.init->b));
  std::iota(pool.begin(), pool.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(pool.size() - i));
    std::swap(pool[i], pool[j]);
    StoreInteger(spec, buffer, i, pool[i]);
  }
}

// Non-negative parts summing to `total`: the gaps between n - 1 sorted cut points drawn uniformly
// from [0, total], so empty and large parts both occur.
void DrawPartition(const TensorSpec& spec, std::span<std::byte> buffer, Rng& rng) {
  const int64_t n = spec.NumElements();
  const auto total = static_cast<int64_t>(spec.init->b);
  std::vector<int64_t> cuts(static_cast<std::size_t>(n - 1));
  for (int64_t& c : cuts) c = static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(total + 1));
  std::sort(cuts.begin(), cuts.end());
  int64_t previous = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t cut = i + 1 < n ? cuts[i] : total;
    StoreInteger(spec, buffer, i, cut - previous);
    previous = cut;
  }
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = SplitMix(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

double Rng::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1;
  do u1 = Uniform01(); while (u1 <= 0);
  const double u2 = Uniform01();
  const double r = std::sqrt(-2.0 * std::log(u1));
  spare_ = r * std::sin(2 * M_PI * u2);
  has_spare_ = true;
  return r * std::cos(2 * M_PI * u2);
}

uint64_t MixSeed(uint64_t base, uint64_t stream) {
  uint64_t x = base ^ (stream * 0xd1b54a32d192ed03ULL);
  return SplitMix(x);
}

void FillInput(const TensorSpec& spec, std::span<std::byte> buffer, uint64_t seed) {
  Rng rng(seed);
  if (spec.init->kind == Initializer::Kind::kPermutation) return DrawPermutation(spec, buffer, rng);
  if (spec.init->kind == Initializer::Kind::kPartition) return DrawPartition(spec, buffer, rng);
  const int64_t n = spec.NumElements();
  for (int64_t i = 0; i < n; ++i) Draw(spec, buffer, i, rng);
}

void RefreshInput(const TensorSpec& spec, std::span<std::byte> buffer, uint64_t seed, double fraction) {
  if (spec.init->IsStructured()) return FillInput(spec, buffer, seed);  // small index tensors
  Rng rng(seed);
  const int64_t n = spec.NumElements();
  const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(n) * fraction));
  for (int64_t k = 0; k < count; ++k) Draw(spec, buffer, static_cast<int64_t>(rng.Next() % static_cast<uint64_t>(n)), rng);
}

}  // namespace kernelgym
