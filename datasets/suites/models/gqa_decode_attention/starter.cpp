#include <cmath>
#include <cstdint>
#include <vector>

// Naive GQA decode attention over a KV cache: for each sequence b and query head h (kv head
// h / (Hq / Hk)), scalar dot products of q[b, h] with the first lengths[b] cached keys, a scalar
// softmax, then the weighted sum of the cached values. Slots s >= lengths[b] are never read.
extern "C" void kernel(const float* q, const float* k_cache, const float* v_cache, const int32_t* lengths,
                       float* out, int64_t B, int64_t Hq, int64_t Hk, int64_t Smax, int64_t D) {
    const int64_t G = Hq / Hk;
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(Smax);
    for (int64_t b = 0; b < B; ++b) {
        const int64_t L = lengths[b];
        for (int64_t h = 0; h < Hq; ++h) {
            const float* qh = q + (b * Hq + h) * D;
            const float* kh = k_cache + (b * Hk + h / G) * Smax * D;
            const float* vh = v_cache + (b * Hk + h / G) * Smax * D;
            float* o = out + (b * Hq + h) * D;
            float m = -INFINITY;
            for (int64_t s = 0; s < L; ++s) {
                float dot = 0.0f;
                for (int64_t d = 0; d < D; ++d) dot += qh[d] * kh[s * D + d];
                p[s] = dot * scale;
                if (p[s] > m) m = p[s];
            }
            float sum = 0.0f;
            for (int64_t s = 0; s < L; ++s) {
                p[s] = std::exp(p[s] - m);
                sum += p[s];
            }
            for (int64_t d = 0; d < D; ++d) o[d] = 0.0f;
            for (int64_t s = 0; s < L; ++s)
                for (int64_t d = 0; d < D; ++d) o[d] += p[s] * vh[s * D + d];
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < D; ++d) o[d] *= inv;
        }
    }
}
