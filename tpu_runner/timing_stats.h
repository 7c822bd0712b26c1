// Statistics over raw timing samples. Small, pure and exactly tested (tests/timing_stats_test.cc):
// every timing figure kernelgym reports comes from here.
#pragma once

#include <span>
#include <vector>

#include "core/result.h"

namespace kernelgym {

// Linear-interpolated percentile (q in [0, 1]) of unsorted values, as numpy's default.
double Percentile(std::span<const double> values, double q);

// median, p10, p90, min and coefficient of variation (stddev / mean) of the values.
TimeStats Summarize(std::span<const double> values);

// What a call's wall time holds beyond the called process's CPU time when nothing else ran: the
// judge times each call through the doorbell, so its futex wake-ups (measured here: 5-7 us at
// least, ~10 us median, 22-25 us at p99 per call; docs/benchmarks.md) are in the wall time only.
inline constexpr double kCallGapAllowanceNs = 25'000;

// A sample was preempted when its wall time exceeds the CPU time the process spent by more
// than 2% + kCallGapAllowanceNs: something else ran on that CPU meanwhile.
bool IsPreempted(double wall_ns, double cpu_ns);

struct RatioEstimate {
  double median = 0;
  double low = 0, high = 0;  // distribution-free 95% confidence interval for the median
  // Largest relative distance from the median to a bound: max(median/low, high/median) - 1.
  double relative_half_width = 0;
};

// Median of per-round ratios with an exact binomial (order-statistic) 95% confidence interval.
// Needs at least 6 ratios; returns zeros otherwise.
RatioEstimate EstimateMedianRatio(std::span<const double> ratios);

// The speedup over non-discarded rounds: reference time / candidate time per round.
RatioEstimate EstimateSpeedup(std::span<const TimingSample> samples);

}  // namespace kernelgym
