#include <cmath>
#include <cstdint>

// Naive Linear + add_value + Swish + Tanh + exact GELU + Hardtanh(-1, 1), in the literal order:
// one dot product of a row of x with a row of weight (nn.Linear layout, weight[N, K]) per output.
extern "C" void kernel(const float* x, const float* weight, const float* bias,
                       const float* add_value, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            float v = acc + bias[n];
            v = v + add_value[n];
            v = v * (1.0f / (1.0f + std::exp(-v)));                  // Swish
            v = std::tanh(v);                                         // Tanh
            v = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));  // GELU (erf)
            v = std::min(std::max(v, -1.0f), 1.0f);                   // Hardtanh
            y[m * N + n] = v;
        }
    }
}
