#include <cmath>
#include <cstdint>

// Naive rotary position embedding (half-split / NeoX layout, base 10000) on q[T, Hq, D] and
// k[T, Hk, D]: for each token, head and pair i < D/2, with a = pos[t] * 10000^(-2i/D) computed in
// double and c = (float)cos(a), s = (float)sin(a):
//   out[i] = x[i] * c - x[i + D/2] * s,   out[i + D/2] = x[i + D/2] * c + x[i] * s.
// The angle and its cos/sin are recomputed for every head.
extern "C" void kernel(const float* q, const float* k, const int32_t* pos, float* q_out, float* k_out,
                       int64_t T, int64_t Hq, int64_t Hk, int64_t D) {
    const int64_t half = D / 2;
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < Hq + Hk; ++h) {
            const float* x = h < Hq ? q + (t * Hq + h) * D : k + (t * Hk + (h - Hq)) * D;
            float* o = h < Hq ? q_out + (t * Hq + h) * D : k_out + (t * Hk + (h - Hq)) * D;
            for (int64_t i = 0; i < half; ++i) {
                double inv_freq = 1.0 / std::pow(10000.0, (double)(2 * i) / (double)D);
                double a = (double)pos[t] * inv_freq;
                float c = (float)std::cos(a);
                float s = (float)std::sin(a);
                float x1 = x[i], x2 = x[i + half];
                o[i] = x1 * c - x2 * s;
                o[i + half] = x2 * c + x1 * s;
            }
        }
    }
}
