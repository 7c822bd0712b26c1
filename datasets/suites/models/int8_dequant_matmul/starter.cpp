#include <cstdint>

// Naive weight-only int8 linear layer: y[m, n] = scale[n] * sum_k x[m, k] * wq[n, k] + bias[n],
// where wq holds int8 values (in [-127, 127]) stored as int32, in nn.Linear layout [N, K]. One
// scalar dot product per output, the weight converted element by element and the
// per-channel scale applied once after the sum. The sum is accumulated in double: a sequential
// float sum of 2048 terms drifts by up to ~7e-6, close to the tolerance.
extern "C" void kernel(const float* x, const int32_t* wq, const float* scale, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; ++k)
                acc += (double)x[m * K + k] * wq[n * K + k];
            y[m * N + n] = (float)acc * scale[n] + bias[n];
        }
    }
}
