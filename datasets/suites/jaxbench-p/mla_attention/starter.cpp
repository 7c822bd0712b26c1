#include <cmath>
#include <cstdint>
#include <vector>

// Naive multi-head latent attention (DeepSeek-V3 style), all weights [in, out] row-major.
// x[S, DM]; q = RMSNorm(x @ w_dq) @ w_uq, per head h the columns h*(DN+DR) + [0, DN) (nope) and
// [DN, DN+DR) (rope); c = RMSNorm(x @ w_dkv); k_nope = c @ w_uk, v = c @ w_uv (per head column
// blocks); k_pe = x @ w_kr shared by every head. RoPE base 10000 on half-split pairs (t, t+DR/2)
// at positions 0..S-1; causal softmax of (q_nope.k_nope + q_pe.k_pe) / sqrt(DN+DR); heads
// concatenated and projected by w_o. Head dims DN = 64, DR = 32, DV = 64.

// y[M, N] = a[M, K] @ b[K, N]: one scalar dot product per output.
static void matmul(const float* a, const float* b, float* y, int64_t M, int64_t K, int64_t N) {
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) acc += a[m * K + k] * b[k * N + n];
            y[m * N + n] = acc;
        }
}

// In place RMSNorm of each row of y[M, N] (eps 1e-6) with weight w[N].
static void rms_norm(float* y, const float* w, int64_t M, int64_t N) {
    for (int64_t m = 0; m < M; ++m) {
        float ss = 0.0f;
        for (int64_t n = 0; n < N; ++n) ss += y[m * N + n] * y[m * N + n];
        const float r = 1.0f / std::sqrt(ss / (float)N + 1e-6f);
        for (int64_t n = 0; n < N; ++n) y[m * N + n] = y[m * N + n] * r * w[n];
    }
}

// In place RoPE of the DR values at e (position pos), half-split pairs (t, t + DR/2).
static void rope(float* e, int64_t pos, int64_t DR) {
    const int64_t half = DR / 2;
    for (int64_t t = 0; t < half; ++t) {
        const float inv_freq = 1.0f / std::pow(10000.0f, (float)(2 * t) / (float)DR);
        const float angle = (float)pos * inv_freq;
        const float c = std::cos(angle), s = std::sin(angle);
        const float x1 = e[t], x2 = e[t + half];
        e[t] = x1 * c - x2 * s;
        e[t + half] = x2 * c + x1 * s;
    }
}

extern "C" void kernel(const float* x, const float* w_dq, const float* q_norm, const float* w_uq,
                       const float* w_dkv, const float* kv_norm, const float* w_uk,
                       const float* w_uv, const float* w_kr, const float* w_o, float* out,
                       int64_t S, int64_t DM, int64_t H, int64_t QL, int64_t KVL) {
    // head dims are fixed (not sizes: the harness passes at most 16 arguments)
    const int64_t DN = 64, DR = 32, DV = 64;
    const int64_t DQK = DN + DR;
    std::vector<float> cq(S * QL), q(S * H * DQK), c(S * KVL), kn(S * H * DN), v(S * H * DV);
    std::vector<float> kpe(S * DR), att(S * H * DV), p(S);

    matmul(x, w_dq, cq.data(), S, DM, QL);
    rms_norm(cq.data(), q_norm, S, QL);
    matmul(cq.data(), w_uq, q.data(), S, QL, H * DQK);
    matmul(x, w_dkv, c.data(), S, DM, KVL);
    rms_norm(c.data(), kv_norm, S, KVL);
    matmul(c.data(), w_uk, kn.data(), S, KVL, H * DN);
    matmul(c.data(), w_uv, v.data(), S, KVL, H * DV);
    matmul(x, w_kr, kpe.data(), S, DM, DR);
    for (int64_t s = 0; s < S; ++s) {
        rope(&kpe[s * DR], s, DR);
        for (int64_t h = 0; h < H; ++h) rope(&q[(s * H + h) * DQK + DN], s, DR);
    }

    const float scale = 1.0f / std::sqrt((float)DQK);
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < S; ++i) {
            const float* qi = &q[(i * H + h) * DQK];
            float m = -INFINITY;
            for (int64_t j = 0; j <= i; ++j) {
                const float* kj = &kn[(j * H + h) * DN];
                float sc = 0.0f;
                for (int64_t d = 0; d < DN; ++d) sc += qi[d] * kj[d];
                for (int64_t d = 0; d < DR; ++d) sc += qi[DN + d] * kpe[j * DR + d];
                sc *= scale;
                p[j] = sc;
                if (sc > m) m = sc;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j <= i; ++j) {
                p[j] = std::exp(p[j] - m);
                sum += p[j];
            }
            float* oi = &att[(i * H + h) * DV];
            for (int64_t d = 0; d < DV; ++d) oi[d] = 0.0f;
            for (int64_t j = 0; j <= i; ++j)
                for (int64_t d = 0; d < DV; ++d) oi[d] += p[j] * v[(j * H + h) * DV + d];
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < DV; ++d) oi[d] *= inv;
        }

    matmul(att.data(), w_o, out, S, H * DV, DM);
}
