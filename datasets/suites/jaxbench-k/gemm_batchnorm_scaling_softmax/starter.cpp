#include <algorithm>
#include <cmath>
#include <cstdint>

// Naive Linear (no bias) + training-mode BatchNorm1d + scalar scale + row softmax. The product
// is written into y, each column is normalized in place with its batch mean and biased variance
// (two passes over the column), scaled and shifted, multiplied by scale[0]; then each row gets a
// max-subtracted softmax.
extern "C" void kernel(const float* x, const float* weight, const float* bn_weight,
                       const float* bn_bias, const float* scale, float* y,
                       int64_t M, int64_t N, int64_t K) {
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
            y[m * N + n] = (float)((float)scale[0] * v);
        }
    }
    for (int64_t m = 0; m < M; ++m) {
        float* row = y + m * N;
        float mx = row[0];
        for (int64_t n = 1; n < N; ++n) mx = std::max(mx, (float)row[n]);
        float sum = 0;
        for (int64_t n = 0; n < N; ++n) sum += std::exp((float)row[n] - mx);
        for (int64_t n = 0; n < N; ++n) row[n] = (float)(std::exp((float)row[n] - mx) / sum);
    }
}
