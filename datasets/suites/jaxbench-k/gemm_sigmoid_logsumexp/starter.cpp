#include <cmath>
#include <cstdint>
#include <vector>

// Naive Linear + sigmoid + Linear + row logsumexp. For each row m of x:
//   h[j] = sigmoid(sum_k x[m, k] * weight1[j, k] + bias1[j])        (weight1[H, K])
//   z[n] = sum_j h[j] * weight2[n, j] + bias2[n]                     (weight2[N, H])
//   y[m] = max_n z[n] + log(sum_n exp(z[n] - max_n z[n]))
extern "C" void kernel(const float* x, const float* weight1, const float* bias1,
                       const float* weight2, const float* bias2, float* y,
                       int64_t M, int64_t K, int64_t H, int64_t N) {
    std::vector<float> h(H), z(N);
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t j = 0; j < H; ++j) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[m * K + k] * weight1[j * K + k];
            h[j] = 1.0f / (1.0f + std::exp(-(acc + bias1[j])));
        }
        float mx = -INFINITY;
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t j = 0; j < H; ++j)
                acc += h[j] * weight2[n * H + j];
            z[n] = acc + bias2[n];
            mx = z[n] > mx ? z[n] : mx;
        }
        float sum = 0.0f;
        for (int64_t n = 0; n < N; ++n)
            sum += std::exp(z[n] - mx);
        y[m] = mx + std::log(sum);
    }
}
