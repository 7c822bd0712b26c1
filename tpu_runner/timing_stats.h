// Statistics over raw timing samples. Small, pure and exactly tested (tests/timing_stats_test.cc):
// every timing figure kernelgym reports comes from here.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kernelgym {

// Linear-interpolated percentile (q in [0, 1]) of unsorted values, as numpy's default.
double Percentile(std::span<const double> values, double q);

// median, p10, p90, min and coefficient of variation (stddev / mean) of the values.
TimeStats Summarize(std::span<const double> values);

struct RatioEstimate {
  double median = 0;
  double low = 0, high = 0;  // distribution-free 95% confidence interval for the median
  // Largest relative distance from the median to a bound: max(median/low, high/median) - 1.
  double relative_half_width = 0;
};

// Median of per-round ratios with an exact binomial (order-statistic) 95% confidence interval.
// Needs at least 6 ratios; returns zeros otherwise.
RatioEstimate EstimateMedianRatio(std::span<const double> ratios);

// The same median with the interpolated order-statistic interval of Hettmansperger and Sheather
// (1986): each bound of the exact interval moved toward the next order statistic inward, by the
// fraction that brings the coverage from the exact interval's (95-97.6%, jumping with n) down to
// 95%. About 7% narrower on average for the same confidence (~14% fewer rounds where the width
// decides when timing stops); still distribution-free in the bounds' ranks, and a bound moves
// only by interpolating between two sample values. Needs at least 6 ratios; zeros otherwise.
RatioEstimate EstimateMedianRatioInterpolated(std::span<const double> ratios);

// The speedup: the median of reference time / candidate time per round, over the rounds not
// marked discarded (the cpu judge marks none), with the interpolated 95% interval.
RatioEstimate EstimateSpeedup(std::span<const TimingSample> samples);

// The timing loop's stopping rule, asked after each round with every round so far: stop once
// the speedup's 95% interval is within +-target_relative_ci of the median, checked at n =
// min_rounds and every 5th round after it. Each look is a chance to stop on an interval narrow by
// chance; looking every round instead would let the reported interval cover less than 95% where
// the target is only just reached (docs/benchmarks.md, "Timing that converges sooner").
bool TimingConverged(std::span<const TimingSample> samples, int min_rounds, double target_relative_ci);

// One reading of the host's load (/proc/loadavg, /proc/stat's cpu line); ok false where unreadable.
struct HostReading {
  bool ok = false;
  double load_avg_1m = 0;
  int procs_running = 0;
  unsigned long long total_ticks = 0, idle_ticks = 0, steal_ticks = 0;  // idle includes iowait
};
HostReading ReadHost();
// Parses the two files' text (exposed for tests): ok false when either is malformed.
HostReading ParseHost(std::string_view loadavg, std::string_view stat);

// The host's load over a window from the readings just before and after it, on `cpus` CPUs.
HostLoad HostLoadBetween(const HostReading& before, const HostReading& after, int cpus);

}  // namespace kernelgym
