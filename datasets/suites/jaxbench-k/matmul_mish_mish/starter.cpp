#include <cmath>
#include <cstdint>

static inline float mish(float v) { return v * std::tanh(std::log1p(std::exp(v))); }

// Naive Linear + Mish + Mish: one dot product per output, W in [N, K] layout.
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            y[m * N + n] = mish(mish(acc + bias[n]));
        }
    }
}
