#include <cmath>
#include <cstdint>
#include <vector>

// Naive causal attention: for each query row, scalar dot products against
// keys 0..i, a scalar softmax, then a weighted sum of value rows.
extern "C" void kernel(const float* q, const float* k, const float* v, float* o,
                       int64_t BH, int64_t S, int64_t D) {
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(S);
    for (int64_t b = 0; b < BH; ++b) {
        const float* qb = q + b * S * D;
        const float* kb = k + b * S * D;
        const float* vb = v + b * S * D;
        float* ob = o + b * S * D;
        for (int64_t i = 0; i < S; ++i) {
            float m = -INFINITY;
            for (int64_t j = 0; j <= i; ++j) {
                float s = 0.0f;
                for (int64_t d = 0; d < D; ++d)
                    s += qb[i * D + d] * kb[j * D + d];
                s *= scale;
                p[j] = s;
                if (s > m) m = s;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j <= i; ++j) {
                p[j] = std::exp(p[j] - m);
                sum += p[j];
            }
            float* oi = ob + i * D;
            for (int64_t d = 0; d < D; ++d) oi[d] = 0.0f;
            for (int64_t j = 0; j <= i; ++j)
                for (int64_t d = 0; d < D; ++d)
                    oi[d] += p[j] * vb[j * D + d];
            float inv = 1.0f / sum;
            for (int64_t d = 0; d < D; ++d) oi[d] *= inv;
        }
    }
}
