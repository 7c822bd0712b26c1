#include <cmath>
#include <cstdint>
#include <vector>

// Naive causal sliding-window grouped-query attention. q, o: [HQ, S, D]; k, v: [HKV, S, D],
// row-major; query head h reads kv head h / (HQ / HKV). Query i attends to the keys
// j = max(0, i - W + 1) .. i (W = 128, fixed): scalar dot products scaled by 1/sqrt(D),
// a scalar softmax, then the weighted sum of those value rows.
extern "C" void kernel(const float* q, const float* k, const float* v, float* o,
                       int64_t HQ, int64_t HKV, int64_t S, int64_t D) {
    const int64_t W = 128;
    const int64_t G = HQ / HKV;
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(S);
    for (int64_t h = 0; h < HQ; ++h) {
        const float* qh = q + h * S * D;
        const float* kh = k + (h / G) * S * D;
        const float* vh = v + (h / G) * S * D;
        float* oh = o + h * S * D;
        for (int64_t i = 0; i < S; ++i) {
            const int64_t j0 = i - W + 1 > 0 ? i - W + 1 : 0;
            float m = -INFINITY;
            for (int64_t j = j0; j <= i; ++j) {
                float s = 0.0f;
                for (int64_t d = 0; d < D; ++d) s += qh[i * D + d] * kh[j * D + d];
                s *= scale;
                p[j] = s;
                if (s > m) m = s;
            }
            float sum = 0.0f;
            for (int64_t j = j0; j <= i; ++j) {
                p[j] = std::exp(p[j] - m);
                sum += p[j];
            }
            float* oi = oh + i * D;
            for (int64_t d = 0; d < D; ++d) oi[d] = 0.0f;
            for (int64_t j = j0; j <= i; ++j)
                for (int64_t d = 0; d < D; ++d) oi[d] += p[j] * vh[j * D + d];
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < D; ++d) oi[d] *= inv;
        }
    }
}
