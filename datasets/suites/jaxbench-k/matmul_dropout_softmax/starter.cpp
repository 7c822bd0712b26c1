#include <cmath>
#include <cstdint>

// Naive Linear + (dropout off: identity) + row softmax: y[m, n] = x[m] . weight[n] + bias[n],
// then each row is softmaxed (max-subtracted).
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        float* row = y + m * N;
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            row[n] = acc + bias[n];
        }
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; ++n) mx = row[n] > mx ? row[n] : mx;
        float sum = 0.0f;
        for (int64_t n = 0; n < N; ++n) {
            row[n] = std::exp(row[n] - mx);
            sum += row[n];
        }
        for (int64_t n = 0; n < N; ++n) row[n] = row[n] / sum;
    }
}
