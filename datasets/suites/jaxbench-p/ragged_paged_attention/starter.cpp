#include <cmath>
#include <cstdint>
#include <vector>

// Naive ragged paged attention (mixed prefill + decode). q, o: [T, HQ, D] new query tokens
// packed in sequence order; kv_pages: [P, PS, HK, 2, D] (k at [.., 0, :], v at [.., 1, :]);
// page_table: [S, PPS]; q_lens: [NP]; context_lens: [S]; S = ND + NP, T = ND + sum(q_lens).
// Sequences 0 .. ND-1 have one new token, sequence ND + j has q_lens[j]. Cached position t of
// sequence s lives in page page_table[s, t / PS], slot t % PS; the i-th new token of s is
// position context_lens[s] + i and attends to positions 0 .. context_lens[s] + i. Query head h
// reads kv head h / (HQ / HK). Per (token, head): scalar dot products, a scalar softmax, then the
// weighted sum of values.
extern "C" void kernel(const float* q, const float* kv_pages, const int32_t* page_table,
                       const int32_t* q_lens, const int32_t* context_lens, float* o,
                       int64_t T, int64_t S, int64_t ND, int64_t NP, int64_t HQ, int64_t HK,
                       int64_t D, int64_t P, int64_t PS, int64_t PPS) {
    (void)T;
    (void)NP;
    (void)P;
    const int64_t G = HQ / HK;
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> p(PPS * PS);
    int64_t tok = 0;  // first packed token of the current sequence
    for (int64_t s = 0; s < S; ++s) {
        const int64_t ql = s < ND ? 1 : q_lens[s - ND];
        const int64_t ctx = context_lens[s];
        const int32_t* pt = page_table + s * PPS;
        for (int64_t i = 0; i < ql; ++i) {
            const int64_t n = ctx + i + 1;  // visible positions 0 .. ctx + i
            for (int64_t h = 0; h < HQ; ++h) {
                const int64_t hk = h / G;
                const float* qh = q + ((tok + i) * HQ + h) * D;
                float m = -INFINITY;
                for (int64_t t = 0; t < n; ++t) {
                    const int64_t slot = pt[t / PS] * PS + t % PS;
                    const float* kt = kv_pages + ((slot * HK + hk) * 2 + 0) * D;
                    float sc = 0.0f;
                    for (int64_t d = 0; d < D; ++d) sc += qh[d] * kt[d];
                    sc *= scale;
                    p[t] = sc;
                    if (sc > m) m = sc;
                }
                float sum = 0.0f;
                for (int64_t t = 0; t < n; ++t) {
                    p[t] = std::exp(p[t] - m);
                    sum += p[t];
                }
                float* oh = o + ((tok + i) * HQ + h) * D;
                for (int64_t d = 0; d < D; ++d) oh[d] = 0.0f;
                for (int64_t t = 0; t < n; ++t) {
                    const int64_t slot = pt[t / PS] * PS + t % PS;
                    const float* vt = kv_pages + ((slot * HK + hk) * 2 + 1) * D;
                    for (int64_t d = 0; d < D; ++d) oh[d] += p[t] * vt[d];
                }
                const float inv = 1.0f / sum;
                for (int64_t d = 0; d < D; ++d) oh[d] *= inv;
            }
        }
        tok += ql;
    }
}
