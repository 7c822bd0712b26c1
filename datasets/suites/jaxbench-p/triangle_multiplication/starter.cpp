#include <cmath>
#include <cstdint>
#include <vector>

// Naive AlphaFold2 triangle multiplicative update (outgoing edges), weights W[in, out]:
// zl = LayerNorm_C(z); pr[q] = zl W_ab[q] + b_ab[q] for q = 0: a, 1: a gate, 2: b, 3: b gate;
// a = sigmoid(a gate) * a, b = sigmoid(b gate) * b;
// t[i, j, :] = sum_k a[i, k, :] * b[j, k, :]; out = sigmoid(zl Wg + bg) * (LayerNorm_CH(t) Wo + bo).

static void layer_norm_row(const float* x, const float* w, const float* bias, float* y, int64_t n) {
    float mean = 0.0f;
    for (int64_t c = 0; c < n; ++c) mean += x[c];
    mean /= (float)n;
    float var = 0.0f;
    for (int64_t c = 0; c < n; ++c) {
        float d = x[c] - mean;
        var += d * d;
    }
    var /= (float)n;
    const float rstd = 1.0f / std::sqrt(var + 1e-5f);
    for (int64_t c = 0; c < n; ++c) y[c] = (x[c] - mean) * rstd * w[c] + bias[c];
}

static float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// y[o] = bias[o] + sum_i x[i] * W[i, o], W[in, out]
static void linear_row(const float* x, const float* W, const float* bias, float* y, int64_t in,
                       int64_t out) {
    for (int64_t o = 0; o < out; ++o) {
        float acc = 0.0f;
        for (int64_t i = 0; i < in; ++i) acc += x[i] * W[i * out + o];
        y[o] = acc + bias[o];
    }
}

extern "C" void kernel(const float* z, const float* ln_in_w, const float* ln_in_b,
                       const float* W_ab, const float* b_ab, const float* ln_out_w,
                       const float* ln_out_b, const float* Wo, const float* bo, const float* Wg,
                       const float* bg, float* out, int64_t N, int64_t C, int64_t CH) {
    const int64_t P = N * N;
    std::vector<float> zl(P * C), a(P * CH), b(P * CH), t(CH), tl(CH), pr(4 * CH), g(C), o(C);
    for (int64_t r = 0; r < P; ++r) {
        const float* zr = zl.data() + r * C;
        layer_norm_row(z + r * C, ln_in_w, ln_in_b, zl.data() + r * C, C);
        for (int64_t q = 0; q < 4; ++q)
            linear_row(zr, W_ab + q * C * CH, b_ab + q * CH, pr.data() + q * CH, C, CH);
        for (int64_t c = 0; c < CH; ++c) a[r * CH + c] = sigmoid(pr[CH + c]) * pr[c];
        for (int64_t c = 0; c < CH; ++c) b[r * CH + c] = sigmoid(pr[3 * CH + c]) * pr[2 * CH + c];
    }
    for (int64_t i = 0; i < N; ++i) {
        for (int64_t j = 0; j < N; ++j) {
            for (int64_t c = 0; c < CH; ++c) {
                float acc = 0.0f;
                for (int64_t k = 0; k < N; ++k) acc += a[(i * N + k) * CH + c] * b[(j * N + k) * CH + c];
                t[c] = acc;
            }
            const int64_t r = i * N + j;
            layer_norm_row(t.data(), ln_out_w, ln_out_b, tl.data(), CH);
            linear_row(tl.data(), Wo, bo, o.data(), CH, C);
            linear_row(zl.data() + r * C, Wg, bg, g.data(), C, C);
            for (int64_t c = 0; c < C; ++c) out[r * C + c] = sigmoid(g[c]) * o[c];
        }
    }
}
