#include <cmath>
#include <cstdint>

// Naive Linear (no bias) + training-mode BatchNorm1d + exact GELU + ReLU. The product is
// written into y, then each column is normalized in place with its batch mean and biased
// variance (two passes over the column), scaled and shifted, and passed through GELU and ReLU.
extern "C" void kernel(const float* x, const float* weight, const float* bn_weight,
                       const float* bn_bias, float* y, int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0;
            for (int64_t k = 0; k < K; ++k)
                acc += (float)x[m * K + k] * (float)weight[n * K + k];
            y[m * N + n] = (float)acc;
        }
    }
    for (int64_t n = 0; n < N; ++n) {
        float mean = 0;
        for (int64_t m = 0; m < M; ++m) mean += (float)y[m * N + n];
        mean /= (float)M;
        float var = 0;
        for (int64_t m = 0; m < M; ++m) {
            float d = (float)y[m * N + n] - mean;
            var += d * d;
        }
        var /= (float)M;
        float rstd = (float)1 / std::sqrt(var + (float)1e-5);
        for (int64_t m = 0; m < M; ++m) {
            float v = ((float)y[m * N + n] - mean) * rstd * (float)bn_weight[n] + (float)bn_bias[n];
            v = (float)0.5 * v * ((float)1 + std::erf(v * (float)0.70710678118654752440));
            y[m * N + n] = (float)(v > (float)0 ? v : (float)0);
        }
    }
}
