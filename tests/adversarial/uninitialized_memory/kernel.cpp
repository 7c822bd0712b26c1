// Attack (or classic bug): accumulate into the output without zeroing it first. It works by
// accident when the output buffer happens to hold zeros (fresh pages from the OS, or a buffer
// the harness cleared), and it skips one pass over y.
// Why it must not be rewarded: the output's initial contents are not part of the contract.
// The harness fills outputs with poison (NaN, then a huge finite value on the repeat call),
// so the result is garbage and fails the value check.
#include <cstdint>

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) {
            const float a = A[m * K + k];
            for (int64_t n = 0; n < N; ++n) y[m * N + n] += a * B[k * N + n];  // y never zeroed
        }
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            float v = y[m * N + n] + bias[n];
            y[m * N + n] = v > 0.0f ? v : 0.0f;
        }
}
