#include <cmath>
#include <cstdint>
#include <vector>

// Naive causal attention with a per-head relative position bias. q, k, v, o: [B, H, S, D],
// bias_table: [H, S], row-major. Score of query i and key j <= i:
// q_i . k_j / sqrt(D) + bias_table[h, i - j]; then a scalar softmax over j = 0..i and the
// weighted sum of value rows.
extern "C" void kernel(const float* q, const float* k, const float* v, const float* bias_table,
                       float* o, int64_t B, int64_t H, int64_t S, int64_t D) {
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(S);
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t bh = b * H + h;
            const float* qh = q + bh * S * D;
            const float* kh = k + bh * S * D;
            const float* vh = v + bh * S * D;
            const float* bias = bias_table + h * S;
            float* oh = o + bh * S * D;
            for (int64_t i = 0; i < S; ++i) {
                float m = -INFINITY;
                for (int64_t j = 0; j <= i; ++j) {
                    float s = 0.0f;
                    for (int64_t d = 0; d < D; ++d) s += qh[i * D + d] * kh[j * D + d];
                    s = s * scale + bias[i - j];
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
                    for (int64_t d = 0; d < D; ++d) oi[d] += p[j] * vh[j * D + d];
                const float inv = 1.0f / sum;
                for (int64_t d = 0; d < D; ++d) oi[d] *= inv;
            }
        }
}
