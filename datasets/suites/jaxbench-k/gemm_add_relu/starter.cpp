#include <cstdint>

// Naive Linear (no bias) + bias add + ReLU: one dot product of a row of x with a row of weight
// (nn.Linear layout, weight[N, K]) per output, then y = max(0, dot + bias[n]).
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            acc = acc + bias[n];
            y[m * N + n] = acc > 0.0f ? acc : 0.0f;
        }
    }
}
