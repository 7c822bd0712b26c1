#include <cmath>
#include <cstdint>
#include <vector>

// Naive causal multi-head attention, q, k, v, o: [B, H, S, D] row-major.
// Per query row i of each (b, h): scalar dot products with keys 0..i, scaled by 1/sqrt(D),
// a scalar softmax (max, exp, sum), then the weighted sum of value rows 0..i.
extern "C" void kernel(const float* q, const float* k, const float* v, float* o,
                       int64_t B, int64_t H, int64_t S, int64_t D) {
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(S);
    for (int64_t bh = 0; bh < B * H; ++bh) {
        const float* qh = q + bh * S * D;
        const float* kh = k + bh * S * D;
        const float* vh = v + bh * S * D;
        float* oh = o + bh * S * D;
        for (int64_t i = 0; i < S; ++i) {
            float m = -INFINITY;
            for (int64_t j = 0; j <= i; ++j) {
                float s = 0.0f;
                for (int64_t d = 0; d < D; ++d)
                    s += qh[i * D + d] * kh[j * D + d];
                s *= scale;
                p[j] = s;
                if (s > m) m = s;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j <= i; ++j) {
                p[j] = std::exp(p[j] - m);
                sum += p[j];
            }
            float* oi = oh + i * D;
            for (int64_t d = 0; d < D; ++d) oi[d] = 0.0f;
            for (int64_t j = 0; j <= i; ++j)
                for (int64_t d = 0; d < D; ++d)
                    oi[d] += p[j] * vh[j * D + d];
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < D; ++d) oi[d] *= inv;
        }
    }
}
