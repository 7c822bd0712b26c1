#include <cmath>
#include <cstdint>

// Naive Linear + max over the batch (dim 0) + subtract the row mean + exact GELU, in the literal
// order: every y[m, n] = x[m] . weight[n] + bias[n] is computed, z[n] = max_m y[m, n], then
// out[0, n] = gelu(z[n] - mean_n z[n]) with gelu(v) = 0.5 * v * (1 + erf(v / sqrt(2))).
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t n = 0; n < N; ++n) {
        float best = -INFINITY;
        for (int64_t m = 0; m < M; ++m) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            acc = acc + bias[n];
            if (acc > best) best = acc;
        }
        y[n] = best;
    }
    float sum = 0.0f;
    for (int64_t n = 0; n < N; ++n) sum += y[n];
    const float mean = sum / (float)N;
    for (int64_t n = 0; n < N; ++n) {
        const float v = y[n] - mean;
        y[n] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    }
}
