#include <cmath>
#include <cstdint>
#include <vector>

// Naive attention with an attention sink and a sliding window (StreamingLLM): query i of head h
// sees key j when j <= i and (j < SINK or i - j < WINDOW), SINK = 4, WINDOW = 128. For each query,
// scalar dot products with the visible keys only, a scalar softmax, then the weighted sum of the
// visible value rows.
extern "C" void kernel(const float* q, const float* k, const float* v, float* o,
                       int64_t H, int64_t S, int64_t D) {
    const int64_t SINK = 4, WINDOW = 128;
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(S);
    std::vector<int64_t> keys(S);
    for (int64_t h = 0; h < H; ++h) {
        const float* qh = q + h * S * D;
        const float* kh = k + h * S * D;
        const float* vh = v + h * S * D;
        float* oh = o + h * S * D;
        for (int64_t i = 0; i < S; ++i) {
            int64_t n = 0;
            for (int64_t j = 0; j <= i; ++j)
                if (j < SINK || i - j < WINDOW) keys[n++] = j;
            float m = -INFINITY;
            for (int64_t c = 0; c < n; ++c) {
                const int64_t j = keys[c];
                float s = 0.0f;
                for (int64_t d = 0; d < D; ++d) s += qh[i * D + d] * kh[j * D + d];
                p[c] = s * scale;
                if (p[c] > m) m = p[c];
            }
            float sum = 0.0f;
            for (int64_t c = 0; c < n; ++c) {
                p[c] = std::exp(p[c] - m);
                sum += p[c];
            }
            float* oi = oh + i * D;
            for (int64_t d = 0; d < D; ++d) oi[d] = 0.0f;
            for (int64_t c = 0; c < n; ++c)
                for (int64_t d = 0; d < D; ++d) oi[d] += p[c] * vh[keys[c] * D + d];
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < D; ++d) oi[d] *= inv;
        }
    }
}
