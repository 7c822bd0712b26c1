#include <cmath>
#include <cstdint>

// Naive Linear + sigmoid + row sum: for each row of x, one dot product with each row of weight
// (nn.Linear layout, weight[N, K]), s = 1 / (1 + exp(-(dot + bias[n]))), y[m] = sum_n s.
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        float total = 0.0f;
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            const float v = acc + bias[n];
            total += 1.0f / (1.0f + std::exp(-v));
        }
        y[m] = total;
    }
}
