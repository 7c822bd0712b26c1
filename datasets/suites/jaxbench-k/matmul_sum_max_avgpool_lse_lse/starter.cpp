#include <algorithm>
#include <cmath>
#include <cstdint>

// Naive Linear + sum + max + mean + logsumexp + logsumexp, in the literal order: every
// x @ weight^T + bias element is computed and added to its row's sum; the remaining ops act on
// that single column (max, mean and logsumexp of one value), written out as they are.
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        float sum = 0.0f;
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight[n * K + k];
            sum += acc + bias[n];
        }
        float v = sum;                       // max over one column
        v = v / 1.0f;                        // mean over one column
        for (int r = 0; r < 2; ++r) {        // logsumexp over one column, twice
            const float mx = v;
            v = mx + std::log(std::exp(v - mx));
        }
        y[m] = v;
    }
}
