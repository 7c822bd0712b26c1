// The check sets (task.json "check_sizes": sizes at which correctness is checked besides the
// timed ones) at work: every evaluation checks every set (the harness's job; task_conformance,
// knobs and honest tests run the starters, the knob templates and the honest kernels through it,
// so all of them are correct at every check set), and a kernel that hard-codes the timed shape —
// correct at the timed sizes alone — fails, with the check set named. (That the TorchScript
// reference runs at each check set, and its outputs there are neither constant nor blind to an
// input, is task_reference_test's.)
#include <gtest/gtest.h>

#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

EvalOptions CorrectnessOnly() {
  EvalOptions options = FastOptions();
  options.run_timing = false;
  return options;
}

// Kernels that only work at cpu/gemm_bias_relu's timed sizes (M = N = K = 256): one tiled for
// them (64 x 64 tiles, no edge code: right whenever 64 divides M and N), one that computes only
// when it is called with exactly them. Both pass at the timed sizes and fail at the check set
// (M=97, N=83, K=71), with the outputs they leave unwritten.
const char* kTiledWithoutEdges = R"(#include <algorithm>
#include <cstdint>
extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    constexpr int64_t T = 64;
    for (int64_t i0 = 0; i0 + T <= M; i0 += T)
        for (int64_t j0 = 0; j0 + T <= N; j0 += T)
            for (int64_t i = i0; i < i0 + T; ++i) {
                float acc[T];
                for (int64_t j = 0; j < T; ++j) acc[j] = bias[j0 + j];
                for (int64_t k = 0; k < K; ++k)
                    for (int64_t j = 0; j < T; ++j) acc[j] += A[i * K + k] * B[k * N + j0 + j];
                for (int64_t j = 0; j < T; ++j) y[i * N + j0 + j] = std::max(acc[j], 0.0f);
            }
}
)";

const char* kOnlyAtTheTimedSizes = R"(#include <cstdint>
extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    if (M != 256 || N != 256 || K != 256) return;
    for (int64_t i = 0; i < 256; ++i)
        for (int64_t j = 0; j < 256; ++j) {
            float acc = bias[j];
            for (int64_t k = 0; k < 256; ++k) acc += A[i * 256 + k] * B[k * 256 + j];
            y[i * 256 + j] = acc > 0.0f ? acc : 0.0f;
        }
}
)";

TEST(HardCodedShapeTest, PassesAtTheTimedSizesAndFailsAtTheCheckSet) {
  const Task* task = Tasks().Find("cpu/gemm_bias_relu");
  ASSERT_NE(task, nullptr);
  ASSERT_EQ(task->sizes, (std::vector<SizeParam>{{"M", 256}, {"N", 256}, {"K", 256}}));
  ASSERT_FALSE(task->check_sizes.empty());
  for (int64_t extent : {task->check_sizes[0][0].value, task->check_sizes[0][1].value})
    ASSERT_NE(extent % 64, 0) << "the check set must not be a multiple of the tiling it is meant to catch";
  Task timed_only = *task;  // what the harness checked before there were check sets
  timed_only.check_sizes.clear();
  for (const char* source : {kTiledWithoutEdges, kOnlyAtTheTimedSizes}) {
    SCOPED_TRACE(source);
    const EvalResult timed = Cpu().Evaluate(timed_only, source, CorrectnessOnly());
    EXPECT_EQ(timed.status, Status::kOk) << StatusName(timed.status) << ": " << timed.message;
    const EvalResult checked = Cpu().Evaluate(*task, source, CorrectnessOnly());
    EXPECT_EQ(checked.status, Status::kIncorrect) << StatusName(checked.status) << ": " << checked.message;
    EXPECT_NE(checked.message.find("M=97, N=83, K=71"), std::string::npos) << checked.message;
  }
}

}  // namespace
}  // namespace kernelgym::testing
