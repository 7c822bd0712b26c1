#include <cmath>
#include <cstdint>
#include <vector>

// Naive paged decode attention with GQA. q, o: [B, HQ, D]; k_pages, v_pages: [P, PS, HK, D];
// page_table: [B, PPS] (int32 page ids); lengths: [B] (int32, 1 .. PPS*PS). Cached position t of
// sequence b lives in page page_table[b, t / PS], slot t % PS. Query head h reads kv head
// h / (HQ / HK). Per (b, h): scalar dot products with the first lengths[b] cached keys, scaled
// by 1/sqrt(D), a scalar softmax, then the weighted sum of the value rows.
extern "C" void kernel(const float* q, const float* k_pages, const float* v_pages,
                       const int32_t* page_table, const int32_t* lengths, float* o,
                       int64_t B, int64_t HQ, int64_t HK, int64_t D, int64_t P, int64_t PS,
                       int64_t PPS) {
    (void)P;
    const int64_t G = HQ / HK;
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(PPS * PS);
    for (int64_t b = 0; b < B; ++b) {
        const int64_t n = lengths[b];
        const int32_t* pt = page_table + b * PPS;
        for (int64_t h = 0; h < HQ; ++h) {
            const int64_t hk = h / G;
            const float* qh = q + (b * HQ + h) * D;
            float m = -INFINITY;
            for (int64_t t = 0; t < n; ++t) {
                const float* kt = k_pages + ((pt[t / PS] * PS + t % PS) * HK + hk) * D;
                float s = 0.0f;
                for (int64_t d = 0; d < D; ++d) s += qh[d] * kt[d];
                s *= scale;
                p[t] = s;
                if (s > m) m = s;
            }
            float sum = 0.0f;
            for (int64_t t = 0; t < n; ++t) {
                p[t] = std::exp(p[t] - m);
                sum += p[t];
            }
            float* oh = o + (b * HQ + h) * D;
            for (int64_t d = 0; d < D; ++d) oh[d] = 0.0f;
            for (int64_t t = 0; t < n; ++t) {
                const float* vt = v_pages + ((pt[t / PS] * PS + t % PS) * HK + hk) * D;
                for (int64_t d = 0; d < D; ++d) oh[d] += p[t] * vt[d];
            }
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < D; ++d) oh[d] *= inv;
        }
    }
}
