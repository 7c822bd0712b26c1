// kernelgym-peaks: measures this machine's single-core peak FLOP/s and memory bandwidth and
// prints them as JSON. The runner runs it once per machine fingerprint and caches the result;
// the numbers set the physical floor below which a timed kernel is implausible.
//
// Both measurements are deliberately optimistic (best of many runs, cache-resident data for
// bandwidth, FMA chains wide enough to saturate the pipes): a floor must never sit above what an
// honest kernel can reach.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// GCC vector extensions as wide as the CPU's registers (-march=native), so that every chain
// below stays in a register: with 64-byte vectors on a CPU without AVX-512, 12 accumulators need
// 24 of its 16 ymm registers, spill to the stack, and the "peak" came out 10x too low (3.8
// GFLOP/s on an AVX2 EPYC that does 40+), which put the physical floor above honest kernels.
// With -ffp-contract=fast, a * b + c becomes an FMA wherever the CPU has one.
#if defined(__AVX512F__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif
typedef float Vec __attribute__((vector_size(kVectorBytes)));
constexpr int kLanes = kVectorBytes / 4;
inline Vec Set1(float v) { return Vec{} + v; }
inline Vec Fma(Vec a, Vec b, Vec c) { return a * b + c; }
inline Vec Add(Vec a, Vec b) { return a + b; }
inline Vec Load(const float* p) {
  Vec v;
  __builtin_memcpy(&v, p, sizeof(v));
  return v;
}
inline float Sum(Vec v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// FLOP/s of independent FMA chains: 12 accumulators cover latency x throughput on current cores.
double PeakFlops() {
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 15; ++rep) {
    Vec acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = Set1(1.0f + i * 1e-3f);
    const Vec a = Set1(0.999999f), b = Set1(1e-7f);
    const long iterations = 400000;
    const double t0 = NowSeconds();
    for (long it = 0; it < iterations; ++it)
      for (int i = 0; i < 12; ++i) acc[i] = Fma(acc[i], a, b);
    const double t1 = NowSeconds();
    Vec total = acc[0];
    for (int i = 1; i < 12; ++i) total = Add(total, acc[i]);
    sink = sink + Sum(total);
    best = std::max(best, 2.0 * kLanes * 12 * static_cast<double>(iterations) / (t1 - t0));
  }
  return best;
}

// Read bandwidth (bytes/s) over a buffer of `bytes`, best of several passes.
double ReadBandwidth(std::size_t bytes) {
  const std::size_t n = bytes / sizeof(float);
  float* data = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % 7);
  const std::size_t passes = std::max<std::size_t>(1, (std::size_t{256} << 20) / bytes);
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 7; ++rep) {
    Vec acc[8];
    for (Vec& v : acc) v = Set1(0);
    const double t0 = NowSeconds();
    for (std::size_t p = 0; p < passes; ++p)
      for (std::size_t i = 0; i + 8 * kLanes <= n; i += 8 * kLanes)
        for (int j = 0; j < 8; ++j) acc[j] = Add(acc[j], Load(data + i + j * kLanes));
    const double t1 = NowSeconds();
    Vec total = acc[0];
    for (int j = 1; j < 8; ++j) total = Add(total, acc[j]);
    sink = sink + Sum(total);
    best = std::max(best, static_cast<double>(bytes) * static_cast<double>(passes) / (t1 - t0));
  }
  std::free(data);
  return best;
}

}  // namespace

int main() {
  const double flops = PeakFlops();
  std::printf("{\"peak_gflops\": %.3f, \"bandwidth_gbps\": {", flops / 1e9);
  double best = 0, dram = 0;
  const std::size_t sizes[] = {std::size_t{16} << 10, std::size_t{256} << 10, std::size_t{4} << 20, std::size_t{128} << 20};
  for (std::size_t i = 0; i < 4; ++i) {
    const double bw = ReadBandwidth(sizes[i]);
    best = std::max(best, bw);
    dram = bw;
    std::printf("%s\"%zu\": %.3f", i ? ", " : "", sizes[i], bw / 1e9);
  }
  std::printf("}, \"peak_gbps\": %.3f, \"dram_gbps\": %.3f}\n", best / 1e9, dram / 1e9);
  return 0;
}
