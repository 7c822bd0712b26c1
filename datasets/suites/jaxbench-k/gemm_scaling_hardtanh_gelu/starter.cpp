#include <cmath>
#include <cstdint>

// Naive Linear + scaling (0.5) + hardtanh [-2, 2] + exact GELU: one dot product of a row of x
// with a row of weight (nn.Linear layout, weight[N, K]) per output, then
// v = clamp(0.5 * (dot + bias[n]), -2, 2), y = 0.5 * v * (1 + erf(v / sqrt(2))).
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    const float scaling = 0.5f, lo = -2.0f, hi = 2.0f;
    const float inv_sqrt2 = 0.70710678118654752f;
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            float v = (acc + bias[n]) * scaling;
            v = v < lo ? lo : (v > hi ? hi : v);
            y[m * N + n] = 0.5f * v * (1.0f + std::erf(v * inv_sqrt2));
        }
    }
}
