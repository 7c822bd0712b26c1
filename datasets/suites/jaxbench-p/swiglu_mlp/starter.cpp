#include <cmath>
#include <cstdint>
#include <vector>

// Naive SwiGLU MLP, one token at a time: g = x[t] . Wg and u = x[t] . Wu (each accumulated over d
// in order, in float), h = silu(g) * u = g / (1 + exp(-g)) * u, then out[t] = h . Wd. All
// matrices row-major: x[T, D], Wg[D, F], Wu[D, F], Wd[F, D], out[T, D].
extern "C" void kernel(const float* x, const float* Wg, const float* Wu, const float* Wd, float* out,
                       int64_t T, int64_t D, int64_t F) {
    std::vector<float> g(F), u(F);
    for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * D;
        for (int64_t f = 0; f < F; ++f) {
            g[f] = 0.0f;
            u[f] = 0.0f;
        }
        for (int64_t d = 0; d < D; ++d) {
            const float a = xt[d];
            for (int64_t f = 0; f < F; ++f) {
                g[f] += a * Wg[d * F + f];
                u[f] += a * Wu[d * F + f];
            }
        }
        for (int64_t f = 0; f < F; ++f) g[f] = g[f] / (1.0f + std::exp(-g[f])) * u[f];
        float* ot = out + t * D;
        for (int64_t d = 0; d < D; ++d) ot[d] = 0.0f;
        for (int64_t f = 0; f < F; ++f) {
            const float h = g[f];
            for (int64_t d = 0; d < D; ++d) ot[d] += h * Wd[f * D + d];
        }
    }
}
