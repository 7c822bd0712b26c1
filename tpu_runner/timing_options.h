// How long and how precisely an evaluation times a kernel against its reference: part of every
// backend's EvalOptions, and of the cpu harness's job.
#pragma once

namespace kernelgym {

struct TimingOptions {
  double budget_seconds = 1.0;        // wall time for the timing loop (after warm-up)
  int min_rounds = 15;
  int max_rounds = 5000;
  double target_relative_ci = 0.03;   // stop when the 95% CI of the speedup is within +-3%
  int warmup_rounds = 3;
  bool refresh_inputs = true;         // draw every input afresh before every round (test-only switch)
};

}  // namespace kernelgym
