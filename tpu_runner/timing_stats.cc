#include "tpu_runner/timing_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <fstream>
#include <sstream>
#include <string>

namespace kernelgym {

double Percentile(std::span<const double> values, double q) {
  if (values.empty()) return 0;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

TimeStats Summarize(std::span<const double> values) {
  TimeStats s;
  if (values.empty()) return s;
  s.median_ns = Percentile(values, 0.5);
  s.p10_ns = Percentile(values, 0.1);
  s.p90_ns = Percentile(values, 0.9);
  s.min_ns = *std::min_element(values.begin(), values.end());
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  double var = 0;
  for (double v : values) var += (v - mean) * (v - mean);
  var = values.size() > 1 ? var / static_cast<double>(values.size() - 1) : 0;
  s.cv = mean > 0 ? std::sqrt(var) / mean : 0;
  return s;
}

namespace {

double HalfBinomialPmf(int n, int i) {
  return std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) - n * std::log(2.0));
}

// The largest k with P(X <= k) <= tail for X ~ Binomial(n, 1/2), or -1 if there is none; with
// `cdf_at_k` = P(X <= k).
int LowerOrderStatistic(int n, double tail, double* cdf_at_k = nullptr) {
  double cdf = 0;
  int k = -1;
  for (int i = 0; i <= n / 2; ++i) {
    const double pmf = HalfBinomialPmf(n, i);
    if (cdf + pmf > tail) break;
    cdf += pmf;
    k = i;
  }
  if (cdf_at_k) *cdf_at_k = cdf;
  return k;
}

}  // namespace

RatioEstimate EstimateMedianRatio(std::span<const double> ratios) {
  RatioEstimate est;
  const int n = static_cast<int>(ratios.size());
  if (n < 6) return est;
  std::vector<double> sorted(ratios.begin(), ratios.end());
  std::sort(sorted.begin(), sorted.end());
  est.median = Percentile(sorted, 0.5);
  // [x_(k+1), x_(n-k)] (1-based order statistics) covers the median with probability
  // 1 - 2 P(X <= k), X ~ Binomial(n, 1/2): the largest k keeping that >= 95%.
  const int k = LowerOrderStatistic(n, 0.025);
  if (k < 0) return RatioEstimate{};
  est.low = sorted[k];
  est.high = sorted[n - 1 - k];
  est.relative_half_width = std::max(est.median / est.low, est.high / est.median) - 1.0;
  return est;
}

RatioEstimate EstimateMedianRatioInterpolated(std::span<const double> ratios) {
  RatioEstimate est;
  const int n = static_cast<int>(ratios.size());
  if (n < 6) return est;
  std::vector<double> sorted(ratios.begin(), ratios.end());
  std::sort(sorted.begin(), sorted.end());
  est.median = Percentile(sorted, 0.5);
  double cdf_k = 0;
  const int k = LowerOrderStatistic(n, 0.025, &cdf_k);
  if (k < 0) return RatioEstimate{};
  // Hettmansperger & Sheather (1986): the exact interval [x_(d), x_(n-d+1)] (d = k + 1, 1-based)
  // covers with gamma_d >= 95%, the next one inward [x_(d+1), x_(n-d)] with gamma_(d+1) < 95%.
  // Each bound moves inward by the fraction lambda that makes the coverage 95% (exactly for
  // a symmetric distribution, within about a point otherwise; tests/unit/timing_stats_test.cc).
  const int d = k + 1;
  const double gamma_d = 1 - 2 * cdf_k;
  const double gamma_next = 1 - 2 * (cdf_k + HalfBinomialPmf(n, d));
  est.low = sorted[k];
  est.high = sorted[n - 1 - k];
  if (d < n - d && gamma_d > gamma_next) {
    const double interp = (gamma_d - 0.95) / (gamma_d - gamma_next);
    const double lambda = (n - d) * interp / (d + (n - 2 * d) * interp);
    est.low = lambda * sorted[k + 1] + (1 - lambda) * sorted[k];
    est.high = lambda * sorted[n - 2 - k] + (1 - lambda) * sorted[n - 1 - k];
  }
  est.relative_half_width = std::max(est.median / est.low, est.high / est.median) - 1.0;
  return est;
}

RatioEstimate EstimateSpeedup(std::span<const TimingSample> samples) {
  std::vector<double> ratios;
  ratios.reserve(samples.size());
  for (const TimingSample& s : samples)
    if (!s.discarded && s.candidate_ns > 0) ratios.push_back(s.reference_ns / s.candidate_ns);
  return EstimateMedianRatioInterpolated(ratios);
}

bool TimingConverged(std::span<const TimingSample> samples, int min_rounds, double target_relative_ci) {
  const int n = static_cast<int>(samples.size());
  if (n < std::max(min_rounds, 6) || (n - min_rounds) % 5 != 0) return false;
  const RatioEstimate est = EstimateSpeedup(samples);
  return est.median > 0 && est.relative_half_width <= target_relative_ci;
}

namespace {

std::string ReadWhole(const char* path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

HostReading ParseHost(std::string_view loadavg, std::string_view stat) {
  HostReading r;
  // loadavg: "0.52 0.58 0.59 3/1012 12345": 1-minute average, then running/total tasks.
  std::istringstream la{std::string(loadavg)};
  double avg5 = 0, avg15 = 0;
  std::string tasks;
  if (!(la >> r.load_avg_1m >> avg5 >> avg15 >> tasks)) return r;
  const auto slash = tasks.find('/');
  if (slash == std::string::npos || slash == 0) return r;
  try {
    r.procs_running = std::stoi(tasks.substr(0, slash));
  } catch (const std::exception&) {
    return r;
  }
  // stat's first line: "cpu  user nice system idle iowait irq softirq steal guest guest_nice".
  const std::string first{stat.substr(0, stat.find('\n'))};
  std::istringstream cpu(first);
  std::string label;
  unsigned long long f[8] = {};
  if (!(cpu >> label) || label != "cpu") return r;
  for (int i = 0; i < 8; ++i)
    if (!(cpu >> f[i])) return r;
  // guest time is already inside user time: the first 8 fields are the whole.
  for (unsigned long long x : f) r.total_ticks += x;
  r.idle_ticks = f[3] + f[4];
  r.steal_ticks = f[7];
  r.ok = true;
  return r;
}

HostReading ReadHost() { return ParseHost(ReadWhole("/proc/loadavg"), ReadWhole("/proc/stat")); }

HostLoad HostLoadBetween(const HostReading& before, const HostReading& after, int cpus) {
  HostLoad h;
  if (!before.ok || !after.ok || cpus <= 0) return h;
  h.sampled = true;
  h.cpus = cpus;
  h.load_avg_1m = after.load_avg_1m;
  h.procs_running = std::max(before.procs_running, after.procs_running);
  if (after.total_ticks > before.total_ticks) {
    const double total = static_cast<double>(after.total_ticks - before.total_ticks);
    const double idle = after.idle_ticks >= before.idle_ticks ? static_cast<double>(after.idle_ticks - before.idle_ticks) : 0;
    const double steal =
        after.steal_ticks >= before.steal_ticks ? static_cast<double>(after.steal_ticks - before.steal_ticks) : 0;
    h.busy_fraction = std::clamp(1 - idle / total, 0.0, 1.0);
    h.steal_fraction = std::clamp(steal / total, 0.0, 1.0);
  }
  return h;
}

}  // namespace kernelgym
