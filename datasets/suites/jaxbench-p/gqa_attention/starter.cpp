#include <cmath>
#include <cstdint>
#include <vector>

// Naive causal grouped-query attention. q, o: [B, S, HQ, D]; k, v: [B, S, HKV, D], row-major.
// Query head h reads kv head h / (HQ / HKV). Per query row: scalar dot products with keys
// 0..i scaled by 1/sqrt(D), a scalar softmax, then the weighted sum of value rows 0..i.
extern "C" void kernel(const float* q, const float* k, const float* v, float* o,
                       int64_t B, int64_t S, int64_t HQ, int64_t HKV, int64_t D) {
    const int64_t G = HQ / HKV;
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(S);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < HQ; ++h) {
            const int64_t hk = h / G;
            for (int64_t i = 0; i < S; ++i) {
                const float* qi = q + ((b * S + i) * HQ + h) * D;
                float m = -INFINITY;
                for (int64_t j = 0; j <= i; ++j) {
                    const float* kj = k + ((b * S + j) * HKV + hk) * D;
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; ++d) s += qi[d] * kj[d];
                    s *= scale;
                    p[j] = s;
                    if (s > m) m = s;
                }
                float sum = 0.0f;
                for (int64_t j = 0; j <= i; ++j) {
                    p[j] = std::exp(p[j] - m);
                    sum += p[j];
                }
                float* oi = o + ((b * S + i) * HQ + h) * D;
                for (int64_t d = 0; d < D; ++d) oi[d] = 0.0f;
                for (int64_t j = 0; j <= i; ++j) {
                    const float* vj = v + ((b * S + j) * HKV + hk) * D;
                    for (int64_t d = 0; d < D; ++d) oi[d] += p[j] * vj[d];
                }
                const float inv = 1.0f / sum;
                for (int64_t d = 0; d < D; ++d) oi[d] *= inv;
            }
        }
}
