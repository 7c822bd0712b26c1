#include <cmath>
#include <cstdint>
#include <vector>

// Naive GEMM + training-mode BatchNorm1d (batch statistics over M, biased variance, eps 1e-5)
// + scalar bias add + divide by 1.0 + Swish, in the literal order.
extern "C" void kernel(const float* x, const float* weight, const float* bn_weight,
                       const float* bn_bias, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            y[m * N + n] = acc;
        }
    for (int64_t n = 0; n < N; ++n) {
        float mean = 0.0f;
        for (int64_t m = 0; m < M; ++m) mean += y[m * N + n];
        mean /= (float)M;
        float var = 0.0f;
        for (int64_t m = 0; m < M; ++m) {
            float d = y[m * N + n] - mean;
            var += d * d;
        }
        var /= (float)M;
        float rstd = 1.0f / std::sqrt(var + 1e-5f);
        for (int64_t m = 0; m < M; ++m) {
            float v = (y[m * N + n] - mean) * rstd * bn_weight[n] + bn_bias[n];
            v = v + bias[0];
            v = v / 1.0f;
            y[m * N + n] = v * (1.0f / (1.0f + std::exp(-v)));
        }
    }
}
