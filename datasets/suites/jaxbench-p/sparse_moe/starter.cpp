#include <cmath>
#include <cstdint>
#include <vector>

// Naive top-2 sparse MoE layer (Mixtral style), one token at a time:
//   router logits l[e] = x[t] . Wr[:, e] (exact in float32 in any summation order: x and Wr lie on
//   power-of-two grids); the two largest, i1 (largest) and i2, experts scanned in ascending index
//   and replaced only on a strictly greater logit (equal logits -> the lower expert index first);
//   gates = softmax over (l[i1], l[i2]);
//   out[t] = sum over the two chosen experts e of gate_e * (silu(x[t] . Wg[e]) * (x[t] . Wu[e])) . Wd[e].
// x[T, D], Wr[D, E], Wg[E, D, F], Wu[E, D, F], Wd[E, F, D], out[T, D], all row-major; the dot
// products are accumulated in order, in float.
extern "C" void kernel(const float* x, const float* Wr, const float* Wg, const float* Wu, const float* Wd,
                       float* out, int64_t T, int64_t D, int64_t F, int64_t E) {
    std::vector<float> logit(E), g(F), u(F);
    for (int64_t t = 0; t < T; ++t) {
        const float* xt = x + t * D;
        float* ot = out + t * D;
        for (int64_t e = 0; e < E; ++e) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; ++d) acc += xt[d] * Wr[d * E + e];
            logit[e] = acc;
        }
        int64_t i1 = 0;
        for (int64_t e = 1; e < E; ++e)
            if (logit[e] > logit[i1]) i1 = e;
        int64_t i2 = i1 == 0 ? 1 : 0;
        for (int64_t e = 0; e < E; ++e)
            if (e != i1 && logit[e] > logit[i2]) i2 = e;
        const float p2 = std::exp(logit[i2] - logit[i1]);  // logit[i1] >= logit[i2]
        const float gate1 = 1.0f / (1.0f + p2);
        const float gate2 = p2 / (1.0f + p2);

        for (int64_t d = 0; d < D; ++d) ot[d] = 0.0f;
        for (int64_t k = 0; k < 2; ++k) {
            const int64_t e = k == 0 ? i1 : i2;
            const float gate = k == 0 ? gate1 : gate2;
            const float* wg = Wg + e * D * F;
            const float* wu = Wu + e * D * F;
            const float* wd = Wd + e * F * D;
            for (int64_t f = 0; f < F; ++f) {
                g[f] = 0.0f;
                u[f] = 0.0f;
            }
            for (int64_t d = 0; d < D; ++d) {
                const float a = xt[d];
                for (int64_t f = 0; f < F; ++f) {
                    g[f] += a * wg[d * F + f];
                    u[f] += a * wu[d * F + f];
                }
            }
            for (int64_t f = 0; f < F; ++f) g[f] = g[f] / (1.0f + std::exp(-g[f])) * u[f];
            std::vector<float> y(D, 0.0f);
            for (int64_t f = 0; f < F; ++f) {
                const float h = g[f];
                for (int64_t d = 0; d < D; ++d) y[d] += h * wd[f * D + d];
            }
            for (int64_t d = 0; d < D; ++d) ot[d] += gate * y[d];
        }
    }
}
