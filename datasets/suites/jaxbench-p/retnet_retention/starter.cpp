#include <cmath>
#include <cstdint>
#include <vector>

// Naive RetNet parallel retention, one (batch, head, query row) at a time:
// s[m] = (q[n] . k[m]) / sqrt(DK) * gamma_h^(n-m) for m <= n, gamma_h = 1 - 2^(-5-h);
// out[n] = sum_m s[m] * v[m] / max(sum_m |s[m]|, 1).
extern "C" void kernel(const float* q, const float* k, const float* v, float* out,
                       int64_t B, int64_t H, int64_t S, int64_t DK, int64_t DV) {
    const float scale = 1.0f / std::sqrt((float)DK);
    std::vector<float> s(S);
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t h = 0; h < H; ++h) {
            const float gamma = 1.0f - std::ldexp(1.0f, (int)(-5 - h));
            const int64_t bh = b * H + h;
            const float* qb = q + bh * S * DK;
            const float* kb = k + bh * S * DK;
            const float* vb = v + bh * S * DV;
            float* ob = out + bh * S * DV;
            for (int64_t n = 0; n < S; ++n) {
                float abs_sum = 0.0f;
                for (int64_t m = 0; m <= n; ++m) {
                    float dot = 0.0f;
                    for (int64_t d = 0; d < DK; ++d)
                        dot += qb[n * DK + d] * kb[m * DK + d];
                    s[m] = dot * scale * std::pow(gamma, (float)(n - m));
                    abs_sum += std::fabs(s[m]);
                }
                const float denom = abs_sum > 1.0f ? abs_sum : 1.0f;
                float* on = ob + n * DV;
                for (int64_t d = 0; d < DV; ++d) on[d] = 0.0f;
                for (int64_t m = 0; m <= n; ++m)
                    for (int64_t d = 0; d < DV; ++d)
                        on[d] += s[m] * vb[m * DV + d];
                for (int64_t d = 0; d < DV; ++d) on[d] /= denom;
            }
        }
    }
}
