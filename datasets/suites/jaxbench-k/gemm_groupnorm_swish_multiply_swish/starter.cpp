#include <cmath>
#include <cstdint>
#include <vector>

// Naive Linear + GroupNorm (32 groups, eps 1e-5) + Swish + multiply + Swish, in the literal
// order: one row of the Linear output at a time, then the group statistics of that row.
extern "C" void kernel(const float* x, const float* weight, const float* lin_bias,
                       const float* gn_weight, const float* gn_bias,
                       const float* multiply_weight, float* y, int64_t M, int64_t N, int64_t K) {
    const int64_t G = 32;
    const int64_t C = N / G;
    std::vector<float> row(N);
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            row[n] = acc + lin_bias[n];
        }
        for (int64_t g = 0; g < G; ++g) {
            float mean = 0.0f;
            for (int64_t c = 0; c < C; ++c) mean += row[g * C + c];
            mean /= (float)C;
            float var = 0.0f;
            for (int64_t c = 0; c < C; ++c) {
                float d = row[g * C + c] - mean;
                var += d * d;
            }
            var /= (float)C;
            float rstd = 1.0f / std::sqrt(var + 1e-5f);
            for (int64_t c = 0; c < C; ++c) {
                int64_t n = g * C + c;
                float v = (row[n] - mean) * rstd * gn_weight[n] + gn_bias[n];
                v = v * (1.0f / (1.0f + std::exp(-v)));
                v = v * multiply_weight[n];
                y[m * N + n] = v * (1.0f / (1.0f + std::exp(-v)));
            }
        }
    }
}
