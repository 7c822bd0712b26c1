// Timing statistics (tpu_runner/timing_stats.h), checked against hand-computed values.
#include "tpu_runner/timing_stats.h"

#include "tpu_runner/timing_options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

namespace kernelgym {
namespace {

std::vector<double> Range(int from, int to) {  // from..to inclusive
  std::vector<double> v;
  for (int i = from; i <= to; ++i) v.push_back(i);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Percentile: numpy.percentile(values, 100 * q) with the default 'linear' method.

TEST(Percentile, LinearInterpolationLikeNumpy) {
  const std::vector<double> v{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 2.5);    // pos 1.5
  EXPECT_DOUBLE_EQ(Percentile(v, 0.1), 1.3);    // pos 0.3
  EXPECT_DOUBLE_EQ(Percentile(v, 0.9), 3.7);    // pos 2.7
  EXPECT_DOUBLE_EQ(Percentile(v, 0.25), 1.75);  // pos 0.75
}

TEST(Percentile, UnsortedInput) {
  // np.percentile([15, 20, 35, 40, 50], [40, 50, 75]) == [29, 35, 40]
  const std::vector<double> v{50, 15, 40, 20, 35};
  EXPECT_DOUBLE_EQ(Percentile(v, 0.4), 29.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 35.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.75), 40.0);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.3), 20.0 + 0.2 * 15.0);  // pos 1.2
}

TEST(Percentile, EvenCountMedianAveragesTheMiddlePair) {
  const std::vector<double> v{7, 1, 100, 3, 9, 2};  // sorted 1 2 3 7 9 100
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 5.0);
}

TEST(Percentile, DegenerateInputs) {
  EXPECT_EQ(Percentile(std::vector<double>{}, 0.5), 0.0);
  const std::vector<double> one{42.0};
  EXPECT_DOUBLE_EQ(Percentile(one, 0.0), 42.0);
  EXPECT_DOUBLE_EQ(Percentile(one, 0.5), 42.0);
  EXPECT_DOUBLE_EQ(Percentile(one, 1.0), 42.0);
  const std::vector<double> same{5, 5, 5};
  EXPECT_DOUBLE_EQ(Percentile(same, 0.37), 5.0);
}

TEST(Percentile, DoesNotModifyInput) {
  const std::vector<double> v{3, 1, 2};
  const std::vector<double> copy = v;
  (void)Percentile(v, 0.5);
  EXPECT_EQ(v, copy);
}

// ---------------------------------------------------------------------------------------------
// Summarize

TEST(Summarize, OneToTen) {
  std::vector<double> v = Range(1, 10);
  std::shuffle(v.begin(), v.end(), std::mt19937(7));
  const TimeStats s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.median_ns, 5.5);
  EXPECT_DOUBLE_EQ(s.p10_ns, 1.9);  // pos 0.9
  EXPECT_DOUBLE_EQ(s.p90_ns, 9.1);  // pos 8.1
  EXPECT_DOUBLE_EQ(s.min_ns, 1.0);
  // Sample standard deviation (n - 1): sum((x - 5.5)^2) = 82.5, / 9, sqrt, / mean 5.5.
  EXPECT_NEAR(s.cv, std::sqrt(82.5 / 9.0) / 5.5, 1e-12);
  EXPECT_NEAR(s.cv, 0.5504818825631803, 1e-12);
}

TEST(Summarize, KnownTimings) {
  const std::vector<double> v{1000, 1200, 1100, 900, 5000};  // one outlier
  const TimeStats s = Summarize(v);
  EXPECT_DOUBLE_EQ(s.median_ns, 1100);
  EXPECT_DOUBLE_EQ(s.min_ns, 900);
  EXPECT_DOUBLE_EQ(s.p10_ns, 900 + 0.4 * 100);    // pos 0.4 between 900 and 1000
  EXPECT_DOUBLE_EQ(s.p90_ns, 1200 + 0.6 * 3800);  // pos 3.6 between 1200 and 5000
  const double mean = 9200.0 / 5;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  EXPECT_NEAR(s.cv, std::sqrt(ss / 4) / mean, 1e-12);
}

TEST(Summarize, ConstantAndSingleValuesHaveZeroSpread) {
  const TimeStats c = Summarize(std::vector<double>{250, 250, 250, 250});
  EXPECT_DOUBLE_EQ(c.median_ns, 250);
  EXPECT_DOUBLE_EQ(c.p10_ns, 250);
  EXPECT_DOUBLE_EQ(c.p90_ns, 250);
  EXPECT_DOUBLE_EQ(c.min_ns, 250);
  EXPECT_DOUBLE_EQ(c.cv, 0);
  const TimeStats one = Summarize(std::vector<double>{123});
  EXPECT_DOUBLE_EQ(one.median_ns, 123);
  EXPECT_DOUBLE_EQ(one.min_ns, 123);
  EXPECT_DOUBLE_EQ(one.cv, 0);
}

TEST(Summarize, EmptyIsAllZero) {
  const TimeStats s = Summarize(std::vector<double>{});
  EXPECT_EQ(s.median_ns, 0);
  EXPECT_EQ(s.p10_ns, 0);
  EXPECT_EQ(s.p90_ns, 0);
  EXPECT_EQ(s.min_ns, 0);
  EXPECT_EQ(s.cv, 0);
}

// ---------------------------------------------------------------------------------------------
// No round is discarded (a rule picking rounds could be steered by the candidate, whose own wall
// and CPU time are its to shape): the median carries the rounds another tenant disturbed.

TEST(EstimateSpeedup, AMinorityOfDisturbedRoundsDoesNotMoveTheMedianFar) {
  std::vector<TimingSample> samples;
  for (int i = 0; i < 40; ++i) {
    TimingSample s;
    s.reference_ns = 1e6 * (1 + 0.01 * (i % 5));
    s.candidate_ns = 5e5 * (1 + 0.01 * ((i + 2) % 5));
    // A third of the rounds disturbed: either side's call stretched 2-8x by another process.
    if (i % 3 == 0) (i % 2 ? s.reference_ns : s.candidate_ns) *= 2 + (i % 7);
    samples.push_back(s);
  }
  const RatioEstimate est = EstimateSpeedup(samples);
  EXPECT_NEAR(est.median, 2.0, 0.1);
  // Without the robust statistic (a mean of the ratios) the disturbed rounds would dominate.
  double mean = 0;
  for (const TimingSample& s : samples) mean += s.reference_ns / s.candidate_ns / static_cast<double>(samples.size());
  EXPECT_GT(std::fabs(mean - 2.0), 0.5);
}

// ---------------------------------------------------------------------------------------------
// EstimateMedianRatio: exact order-statistic 95% CI.

TEST(EstimateMedianRatio, TenValuesGiveSecondAndNinthOrderStatistics) {
  // Binomial(10, 1/2): P(X <= 1) = 11/1024 <= 0.025 < P(X <= 2) = 56/1024, so k = 1: [x(2), x(9)].
  std::vector<double> v = Range(1, 10);
  std::shuffle(v.begin(), v.end(), std::mt19937(3));
  const RatioEstimate e = EstimateMedianRatio(v);
  EXPECT_DOUBLE_EQ(e.median, 5.5);
  EXPECT_DOUBLE_EQ(e.low, 2.0);
  EXPECT_DOUBLE_EQ(e.high, 9.0);
  EXPECT_DOUBLE_EQ(e.relative_half_width, std::max(5.5 / 2.0, 9.0 / 5.5) - 1.0);
  EXPECT_DOUBLE_EQ(e.relative_half_width, 1.75);
}

TEST(EstimateMedianRatio, SixValuesGiveTheFullRange) {
  // P(X <= 0) = 1/64 <= 0.025 < P(X <= 1) = 7/64: k = 0, the interval is [min, max].
  const RatioEstimate e = EstimateMedianRatio(std::vector<double>{1.2, 0.9, 1.0, 1.1, 1.3, 0.8});
  EXPECT_DOUBLE_EQ(e.low, 0.8);
  EXPECT_DOUBLE_EQ(e.high, 1.3);
  EXPECT_DOUBLE_EQ(e.median, 1.05);
  EXPECT_DOUBLE_EQ(e.relative_half_width, std::max(1.05 / 0.8, 1.3 / 1.05) - 1.0);
}

TEST(EstimateMedianRatio, KnownOrderStatisticsForLargerN) {
  // Standard tables of the distribution-free 95% CI for the median: n=20 -> ranks (6, 15),
  // n=100 -> ranks (40, 61).
  RatioEstimate e = EstimateMedianRatio(Range(1, 20));
  EXPECT_DOUBLE_EQ(e.low, 6);
  EXPECT_DOUBLE_EQ(e.high, 15);
  EXPECT_DOUBLE_EQ(e.median, 10.5);
  e = EstimateMedianRatio(Range(1, 100));
  EXPECT_DOUBLE_EQ(e.low, 40);
  EXPECT_DOUBLE_EQ(e.high, 61);
  EXPECT_DOUBLE_EQ(e.median, 50.5);
  // n=7: P(X <= 0) = 1/128 <= 0.025 < 8/128 -> [x(1), x(7)].
  e = EstimateMedianRatio(Range(1, 7));
  EXPECT_DOUBLE_EQ(e.low, 1);
  EXPECT_DOUBLE_EQ(e.high, 7);
  EXPECT_DOUBLE_EQ(e.median, 4);
  // n=9: P(X <= 1) = 10/512 <= 0.025 < 46/512 -> [x(2), x(8)].
  e = EstimateMedianRatio(Range(1, 9));
  EXPECT_DOUBLE_EQ(e.low, 2);
  EXPECT_DOUBLE_EQ(e.high, 8);
}

TEST(EstimateMedianRatio, ExactRanksUpToTheRoundLimit) {
  // Ranks computed with exact binomial sums (Python fractions and math.comb).
  struct Case {
    int n, low_rank, high_rank;
  };
  for (const Case& c : {Case{30, 10, 21}, Case{1000, 469, 532}, Case{5000, 2431, 2570}}) {
    SCOPED_TRACE(c.n);
    const RatioEstimate e = EstimateMedianRatio(Range(1, c.n));
    EXPECT_DOUBLE_EQ(e.low, c.low_rank);
    EXPECT_DOUBLE_EQ(e.high, c.high_rank);
    EXPECT_DOUBLE_EQ(e.median, (c.n + 1) / 2.0);
  }
}

TEST(EstimateMedianRatio, FewerThanSixGivesZeros) {
  for (int n = 0; n < 6; ++n) {
    SCOPED_TRACE(n);
    const RatioEstimate e = EstimateMedianRatio(Range(1, n));
    EXPECT_EQ(e.median, 0);
    EXPECT_EQ(e.low, 0);
    EXPECT_EQ(e.high, 0);
    EXPECT_EQ(e.relative_half_width, 0);
  }
}

TEST(EstimateMedianRatio, MedianInsideIntervalAndWidthDefinition) {
  std::mt19937_64 rng(12345);
  std::lognormal_distribution<double> dist(0.3, 0.2);
  for (int n : {6, 7, 10, 31, 100, 1000}) {
    SCOPED_TRACE(n);
    std::vector<double> v(n);
    for (double& x : v) x = dist(rng);
    const RatioEstimate e = EstimateMedianRatio(v);
    EXPECT_DOUBLE_EQ(e.median, Percentile(v, 0.5));
    EXPECT_LE(e.low, e.median);
    EXPECT_LE(e.median, e.high);
    EXPECT_GT(e.low, 0);
    EXPECT_DOUBLE_EQ(e.relative_half_width, std::max(e.median / e.low, e.high / e.median) - 1.0);
    EXPECT_GE(e.relative_half_width, 0);
    // The bounds are sample values.
    EXPECT_NE(std::find(v.begin(), v.end(), e.low), v.end());
    EXPECT_NE(std::find(v.begin(), v.end(), e.high), v.end());
  }
}

TEST(EstimateMedianRatio, IntervalNarrowsWithMoreSamples) {
  std::mt19937_64 rng(99);
  std::normal_distribution<double> dist(2.0, 0.1);
  auto width = [&](int n) {
    std::vector<double> v(n);
    for (double& x : v) x = dist(rng);
    return EstimateMedianRatio(v).relative_half_width;
  };
  const double w20 = width(20), w2000 = width(2000);
  EXPECT_LT(w2000, w20);
  EXPECT_LT(w2000, 0.02);
}

TEST(EstimateMedianRatio, AsymmetricIntervalUsesTheLargerSide) {
  // Sorted: 1 1 1 1 1 1 1 1 1 10 -> median 1, low x(2) = 1, high x(9) = 1: width 0.
  std::vector<double> v(9, 1.0);
  v.push_back(10.0);
  RatioEstimate e = EstimateMedianRatio(v);
  EXPECT_DOUBLE_EQ(e.median, 1.0);
  EXPECT_DOUBLE_EQ(e.high, 1.0);
  EXPECT_DOUBLE_EQ(e.relative_half_width, 0.0);
  // 1 2 2 2 2 2 2 2 4 8: median 2, low x(2) = 2, high x(9) = 4 -> width 4/2 - 1 = 1.
  e = EstimateMedianRatio(std::vector<double>{8, 2, 2, 2, 1, 2, 2, 2, 4, 2});
  EXPECT_DOUBLE_EQ(e.median, 2.0);
  EXPECT_DOUBLE_EQ(e.low, 2.0);
  EXPECT_DOUBLE_EQ(e.high, 4.0);
  EXPECT_DOUBLE_EQ(e.relative_half_width, 1.0);
  // 1 1 4 4 4 4 4 4 4 4: median 4, low 1 -> width 4/1 - 1 = 3 from the low side.
  e = EstimateMedianRatio(std::vector<double>{4, 4, 1, 4, 4, 4, 1, 4, 4, 4});
  EXPECT_DOUBLE_EQ(e.low, 1.0);
  EXPECT_DOUBLE_EQ(e.high, 4.0);
  EXPECT_DOUBLE_EQ(e.relative_half_width, 3.0);
}

// ---------------------------------------------------------------------------------------------
// EstimateSpeedup

TimingSample Sample(double reference_ns, double candidate_ns, bool discarded = false) {
  TimingSample s;
  s.reference_ns = reference_ns;
  s.candidate_ns = candidate_ns;
  s.discarded = discarded;
  return s;
}

TEST(EstimateSpeedup, RatioOfReferenceToCandidatePerRound) {
  std::vector<TimingSample> samples;
  for (int i = 1; i <= 10; ++i) samples.push_back(Sample(1000.0 * i, 1000.0));  // ratios 1..10
  const RatioEstimate e = EstimateSpeedup(samples);
  const RatioEstimate kept = EstimateMedianRatioInterpolated(Range(1, 10));  // the ratios 1..10 only
  EXPECT_DOUBLE_EQ(e.median, 5.5);
  EXPECT_DOUBLE_EQ(e.low, kept.low);
  EXPECT_DOUBLE_EQ(e.high, kept.high);
}

TEST(EstimateSpeedup, SkipsDiscardedSamples) {
  std::vector<TimingSample> samples;
  for (int i = 1; i <= 10; ++i) {
    samples.push_back(Sample(500.0 * i, 500.0));
    samples.push_back(Sample(1e9, 1.0, /*discarded=*/true));  // absurd, but discarded
    samples.push_back(Sample(1.0, 1e9, /*discarded=*/true));
  }
  const RatioEstimate e = EstimateSpeedup(samples);
  const RatioEstimate kept = EstimateMedianRatioInterpolated(Range(1, 10));  // the ratios 1..10 only
  EXPECT_DOUBLE_EQ(e.median, 5.5);
  EXPECT_DOUBLE_EQ(e.low, kept.low);
  EXPECT_DOUBLE_EQ(e.high, kept.high);
}

TEST(EstimateSpeedup, SkipsZeroCandidateTimes) {
  std::vector<TimingSample> samples;
  for (int i = 1; i <= 6; ++i) samples.push_back(Sample(2.0 * i, 1.0));
  samples.push_back(Sample(100.0, 0.0));
  const RatioEstimate e = EstimateSpeedup(samples);
  EXPECT_TRUE(std::isfinite(e.high));
  const RatioEstimate kept = EstimateMedianRatioInterpolated(std::vector<double>{2, 4, 6, 8, 10, 12});
  EXPECT_DOUBLE_EQ(e.high, kept.high);
  EXPECT_DOUBLE_EQ(e.low, kept.low);
}

TEST(EstimateSpeedup, TooFewKeptSamplesGiveZeros) {
  std::vector<TimingSample> samples;
  for (int i = 0; i < 5; ++i) samples.push_back(Sample(2000, 1000));
  for (int i = 0; i < 20; ++i) samples.push_back(Sample(2000, 1000, /*discarded=*/true));
  const RatioEstimate e = EstimateSpeedup(samples);
  EXPECT_EQ(e.median, 0);
  EXPECT_EQ(e.low, 0);
  EXPECT_EQ(e.high, 0);
  samples.push_back(Sample(2000, 1000));  // the sixth kept one
  EXPECT_DOUBLE_EQ(EstimateSpeedup(samples).median, 2.0);
}

// ---------------------------------------------------------------------------------------------
// EstimateMedianRatioInterpolated: the Hettmansperger-Sheather interpolated interval.

TEST(EstimateMedianRatioInterpolated, TwentyValuesMoveEachBoundByLambda) {
  // n = 20: exact interval [x_6, x_15] (coverage 95.86%), next inward [x_7, x_14] (88.47%);
  // lambda = 0.2352342158859... (Python fractions and math.comb).
  const RatioEstimate e = EstimateMedianRatioInterpolated(Range(1, 20));
  EXPECT_NEAR(e.low, 6.2352342158859, 1e-9);
  EXPECT_NEAR(e.high, 14.7647657841141, 1e-9);
  EXPECT_DOUBLE_EQ(e.median, 10.5);
}

TEST(EstimateMedianRatioInterpolated, BoundsLieBetweenTheExactAndTheNextInward) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(0.0, 0.3);
  for (int n : {6, 7, 20, 21, 33, 100, 1000, 5000}) {
    SCOPED_TRACE(n);
    std::vector<double> v(n);
    for (double& x : v) x = dist(rng);
    const RatioEstimate exact = EstimateMedianRatio(v), interp = EstimateMedianRatioInterpolated(v);
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    const int k = static_cast<int>(std::find(s.begin(), s.end(), exact.low) - s.begin());
    EXPECT_DOUBLE_EQ(interp.median, exact.median);
    EXPECT_GE(interp.low, exact.low);
    EXPECT_LE(interp.low, s[k + 1]);
    EXPECT_LE(interp.high, exact.high);
    EXPECT_GE(interp.high, s[n - 2 - k]);
    EXPECT_LE(interp.low, interp.median);
    EXPECT_LE(interp.median, interp.high);
    EXPECT_DOUBLE_EQ(interp.relative_half_width, std::max(interp.median / interp.low, interp.high / interp.median) - 1.0);
  }
}

// What the interpolation buys is only worth having at the promised confidence: over many
// simulated timing loops, the interval must still cover the true median ratio ~95% of the time
// (the exact interval covers 95-97.6%), on a skewed distribution and on one where a fifth of the
// rounds are disturbed by another tenant, while being narrower on average.
TEST(EstimateMedianRatioInterpolated, KeepsNinetyFivePercentCoverageAndIsNarrower) {
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> noise(0.0, 0.05);
  std::exponential_distribution<double> disturbance(2.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (bool disturbed : {false, true}) {
    for (int n : {20, 21, 40, 60}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " disturbed=" << disturbed);
      constexpr int kLoops = 4000;
      int covered_exact = 0, covered_interp = 0;
      double width_exact = 0, width_interp = 0;
      for (int loop = 0; loop < kLoops; ++loop) {
        std::vector<double> v(n);
        // Log-ratios symmetric around 0 (true median ratio 1), disturbed rounds on either side.
        for (double& x : v) {
          double log_ratio = noise(rng);
          if (disturbed && unit(rng) < 0.2) log_ratio += (unit(rng) < 0.5 ? -1 : 1) * disturbance(rng);
          x = std::exp(log_ratio);
        }
        const RatioEstimate exact = EstimateMedianRatio(v), interp = EstimateMedianRatioInterpolated(v);
        covered_exact += exact.low <= 1.0 && 1.0 <= exact.high;
        covered_interp += interp.low <= 1.0 && 1.0 <= interp.high;
        width_exact += exact.high - exact.low;
        width_interp += interp.high - interp.low;
      }
      const double coverage = static_cast<double>(covered_interp) / kLoops;
      EXPECT_GE(coverage, 0.935);  // 95% within ~4 standard errors of 4000 loops
      EXPECT_LE(coverage, 0.965);
      EXPECT_GE(static_cast<double>(covered_exact) / kLoops, coverage - 0.005);
      EXPECT_LT(width_interp, 0.97 * width_exact);
    }
  }
}

TEST(EstimateSpeedup, UsesTheInterpolatedInterval) {
  std::vector<TimingSample> samples;
  for (int i = 1; i <= 20; ++i) {
    TimingSample s;
    s.reference_ns = i * 1e6;
    s.candidate_ns = 1e6;
    samples.push_back(s);
  }
  const RatioEstimate est = EstimateSpeedup(samples);
  EXPECT_NEAR(est.low, 6.2352342158859, 1e-9);
  EXPECT_NEAR(est.high, 14.7647657841141, 1e-9);
}

// ---------------------------------------------------------------------------------------------
// The timing loop's stopping rule (TimingConverged, asked by the cpu judge after every round).

std::vector<TimingSample> Rounds(const std::vector<double>& ratios) {
  std::vector<TimingSample> samples;
  for (double r : ratios) {
    TimingSample s;
    s.reference_ns = r * 1e6;
    s.candidate_ns = 1e6;
    samples.push_back(s);
  }
  return samples;
}

// The first round after which the rule stops, or 0 if it never does within the ratios.
int StopRound(const std::vector<double>& ratios, int min_rounds, double target) {
  std::vector<TimingSample> samples;
  for (std::size_t n = 1; n <= ratios.size(); ++n) {
    samples = Rounds({ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(n)});
    if (TimingConverged(samples, min_rounds, target)) return static_cast<int>(n);
  }
  return 0;
}

TEST(TimingConverged, LooksAtMinRoundsAndEveryFifthRoundAfter) {
  // Ratios within +-1% of 2: the interval is within 3% as soon as there is one.
  std::vector<double> tight;
  for (int i = 0; i < 40; ++i) tight.push_back(2.0 * (1 + 0.01 * std::sin(i)));
  for (int n = 1; n <= 40; ++n) {
    const std::vector<TimingSample> samples = Rounds({tight.begin(), tight.begin() + n});
    EXPECT_EQ(TimingConverged(samples, 15, 0.03), n >= 15 && (n - 15) % 5 == 0) << "n=" << n;
    EXPECT_EQ(TimingConverged(samples, 40, 0.03), n == 40) << "n=" << n;
  }
  // Never below the 6 rounds an interval needs, whatever min_rounds says.
  EXPECT_FALSE(TimingConverged(Rounds({2, 2, 2, 2, 2}), 0, 0.03));
  EXPECT_TRUE(TimingConverged(Rounds({2, 2, 2, 2, 2, 2, 2, 2, 2, 2}), 5, 0.03));
  // Ratios spread +-20%: never within 3%.
  std::vector<double> wide;
  for (int i = 0; i < 60; ++i) wide.push_back(2.0 * (1 + 0.2 * std::sin(i)));
  EXPECT_EQ(StopRound(wide, 15, 0.03), 0);
}

// A kernel whose rounds agree within a percent converges on the judge's default minimum of 15
// rounds (20 before), and loops that stop on the rule still get an interval that covers the
// true median ratio ~95% of the time: on tight rounds (stopping at the minimum) and on rounds a
// fifth of which another tenant disturbed. Where the rounds are spread so that the target is
// reached only after ~35 rounds, stopping the first time the interval is narrow enough favours
// intervals narrow by chance, with the old minimum as with the new (~93%; bench/timing_rules.py
// simulate): there the new rule must cover as well as the old one did on the same rounds.
TEST(TimingConverged, DefaultMinimumStopsTightKernelsSoonerAndKeepsCoverage) {
  const int min_rounds = TimingOptions{}.min_rounds;
  EXPECT_EQ(min_rounds, 15);
  std::mt19937_64 rng(35);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  struct Case {
    double sd, disturbed;
    double most_mean_rounds;
    bool at_the_threshold;
  };
  for (const Case c : {Case{0.01, 0, 15, false}, Case{0.02, 0.2, 18, false}, Case{0.06, 0, 40, true}}) {
    SCOPED_TRACE(::testing::Message() << "sd=" << c.sd << " disturbed=" << c.disturbed);
    std::normal_distribution<double> noise(0.0, c.sd);
    constexpr int kLoops = 4000;
    int stopped = 0, covered = 0, stopped_old = 0, covered_old = 0;
    double rounds = 0, rounds_old = 0;
    for (int loop = 0; loop < kLoops; ++loop) {
      // Log-ratios symmetric around log 2 (true median ratio 2); disturbed rounds on either side.
      std::vector<TimingSample> samples;
      bool done = false, done_old = false;
      for (int n = 1; n <= 300 && !(done && done_old); ++n) {
        double log_ratio = noise(rng);
        if (unit(rng) < c.disturbed) log_ratio += (unit(rng) < 0.5 ? -1 : 1) * std::log(1 + unit(rng));
        TimingSample s;
        s.reference_ns = 2e6 * std::exp(log_ratio);
        s.candidate_ns = 1e6;
        samples.push_back(s);
        for (auto [rule_min, flag, count, cover, sum] : {std::tuple{min_rounds, &done, &stopped, &covered, &rounds},
                                                         std::tuple{20, &done_old, &stopped_old, &covered_old, &rounds_old}}) {
          if (*flag || !TimingConverged(samples, rule_min, 0.03)) continue;
          const RatioEstimate est = EstimateSpeedup(samples);
          *flag = true;
          ++*count;
          *cover += est.low <= 2.0 && 2.0 <= est.high;
          *sum += n;
        }
      }
    }
    ASSERT_EQ(stopped, kLoops);
    ASSERT_EQ(stopped_old, kLoops);
    EXPECT_LE(rounds / stopped, c.most_mean_rounds);
    EXPECT_LT(rounds, rounds_old);
    const double coverage = static_cast<double>(covered) / stopped;
    const double coverage_old = static_cast<double>(covered_old) / stopped_old;
    if (c.at_the_threshold) {
      EXPECT_GE(coverage, coverage_old - 0.015);  // paired: the same rounds for both rules
    } else {
      EXPECT_GE(coverage, 0.935);  // 95% within ~4 standard errors of 4000 loops
      EXPECT_LE(coverage, 0.975);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The host's load around a timing window (/proc/loadavg and /proc/stat as the kernel writes them).

TEST(HostLoad, ParsesLoadavgAndTheCpuLine) {
  const HostReading r = ParseHost("1.50 0.80 0.40 3/412 9981\n",
                                  "cpu  100 5 45 800 20 3 2 25 0 0\ncpu0 50 2 20 400 10 1 1 12 0 0\n");
  ASSERT_TRUE(r.ok);
  EXPECT_DOUBLE_EQ(r.load_avg_1m, 1.5);
  EXPECT_EQ(r.procs_running, 3);
  EXPECT_EQ(r.total_ticks, 1000u);  // the first 8 fields; guest time is inside user time
  EXPECT_EQ(r.idle_ticks, 820u);    // idle + iowait
  EXPECT_EQ(r.steal_ticks, 25u);
}

TEST(HostLoad, MalformedTextIsNotARead) {
  EXPECT_FALSE(ParseHost("", "cpu 1 2 3 4 5 6 7 8\n").ok);
  EXPECT_FALSE(ParseHost("0.1 0.1 0.1 nothing 1\n", "cpu 1 2 3 4 5 6 7 8\n").ok);
  EXPECT_FALSE(ParseHost("0.1 0.1 0.1 1/2 3\n", "intr 1 2 3\n").ok);
  EXPECT_FALSE(ParseHost("0.1 0.1 0.1 1/2 3\n", "cpu 1 2 3\n").ok);
}

TEST(HostLoad, FractionsOverTheWindow) {
  HostReading before = ParseHost("0.5 0 0 1/10 1\n", "cpu 100 0 0 900 0 0 0 0\n");
  HostReading after = ParseHost("2.5 0 0 4/10 1\n", "cpu 250 0 0 1000 0 0 0 50\n");  // +150 busy, +100 idle, +50 steal
  const HostLoad h = HostLoadBetween(before, after, 2);
  ASSERT_TRUE(h.sampled);
  EXPECT_EQ(h.cpus, 2);
  EXPECT_DOUBLE_EQ(h.load_avg_1m, 2.5);
  EXPECT_EQ(h.procs_running, 4);
  EXPECT_DOUBLE_EQ(h.busy_fraction, 200.0 / 300.0);  // user + steal over the window's 300 ticks
  EXPECT_DOUBLE_EQ(h.steal_fraction, 50.0 / 300.0);
  EXPECT_FALSE(HostLoadBetween(HostReading{}, after, 2).sampled);
}

TEST(HostLoad, ThisMachinesProcIsReadable) {
  const HostReading r = ReadHost();
  ASSERT_TRUE(r.ok);
  EXPECT_GE(r.procs_running, 1);  // this test, at least
  EXPECT_GT(r.total_ticks, 0u);
}

}  // namespace
}  // namespace kernelgym
