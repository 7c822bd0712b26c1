#include <cmath>
#include <cstdint>
#include <vector>
#include <immintrin.h>

// Causal attention with AVX2/FMA.
//  * K of each head is transposed once into kT[D][Sp] (Sp = S rounded up to 8,
//    zero padded), so the scores of 32 keys are 4 ymm accumulators updated by
//    one broadcast of q[i][d] per d.
//  * softmax over the unmasked keys uses a vectorized polynomial exp.
//  * P.V accumulates an output row in registers (32 columns at a time).
// Scalar fallback when AVX2/FMA are not available.

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(5.0000001201e-1f));
    __m256 x2 = _mm256_mul_ps(x, x);
    p = _mm256_fmadd_ps(p, x2, _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

static void head(const float* qb, const float* kb, const float* vb, float* ob,
                 int64_t S, int64_t D, float scale, float* kT, float* p) {
    const int64_t Sp = (S + 7) / 8 * 8;
    for (int64_t d = 0; d < D; ++d) {
        for (int64_t j = 0; j < S; ++j) kT[d * Sp + j] = kb[j * D + d];
        for (int64_t j = S; j < Sp; ++j) kT[d * Sp + j] = 0.0f;
    }
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int64_t i = 0; i < S; ++i) {
        const float* qi = qb + i * D;
        const int64_t n = i + 1;             // unmasked keys 0..i
        const int64_t nv = (n + 7) / 8 * 8;  // computed keys (<= Sp)
        // scores
        int64_t j = 0;
        for (; j + 32 <= nv; j += 32) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            const float* kt = kT + j;
            for (int64_t d = 0; d < D; ++d, kt += Sp) {
                __m256 qd = _mm256_broadcast_ss(qi + d);
                a0 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt), a0);
                a1 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt + 8), a1);
                a2 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt + 16), a2);
                a3 = _mm256_fmadd_ps(qd, _mm256_loadu_ps(kt + 24), a3);
            }
            _mm256_storeu_ps(p + j, _mm256_mul_ps(a0, vscale));
            _mm256_storeu_ps(p + j + 8, _mm256_mul_ps(a1, vscale));
            _mm256_storeu_ps(p + j + 16, _mm256_mul_ps(a2, vscale));
            _mm256_storeu_ps(p + j + 24, _mm256_mul_ps(a3, vscale));
        }
        for (; j < nv; j += 8) {
            __m256 a0 = _mm256_setzero_ps();
            const float* kt = kT + j;
            for (int64_t d = 0; d < D; ++d, kt += Sp)
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(qi + d), _mm256_loadu_ps(kt), a0);
            _mm256_storeu_ps(p + j, _mm256_mul_ps(a0, vscale));
        }
        // mask the padded/future lanes of the last vector, then softmax
        for (int64_t t = n; t < nv; ++t) p[t] = -INFINITY;
        __m256 vm = _mm256_set1_ps(-INFINITY);
        for (j = 0; j < nv; j += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(p + j));
        vm = _mm256_set1_ps(hmax(vm));
        __m256 vs = _mm256_setzero_ps();
        for (j = 0; j < nv; j += 8) {
            __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm));
            _mm256_storeu_ps(p + j, e);
            vs = _mm256_add_ps(vs, e);
        }
        float sum = hsum(vs);
        for (int64_t t = n; t < nv; ++t) { sum -= p[t]; p[t] = 0.0f; }
        const float inv = 1.0f / sum;
        const __m256 vinv = _mm256_set1_ps(inv);
        // o_i = (sum_j p_j v_j) / sum
        float* oi = ob + i * D;
        int64_t d0 = 0;
        for (; d0 + 32 <= D; d0 += 32) {
            __m256 o0 = _mm256_setzero_ps(), o1 = o0, o2 = o0, o3 = o0;
            const float* vr = vb + d0;
            for (int64_t t = 0; t < n; ++t, vr += D) {
                __m256 pt = _mm256_broadcast_ss(p + t);
                o0 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(vr), o0);
                o1 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(vr + 8), o1);
                o2 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(vr + 16), o2);
                o3 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(vr + 24), o3);
            }
            _mm256_storeu_ps(oi + d0, _mm256_mul_ps(o0, vinv));
            _mm256_storeu_ps(oi + d0 + 8, _mm256_mul_ps(o1, vinv));
            _mm256_storeu_ps(oi + d0 + 16, _mm256_mul_ps(o2, vinv));
            _mm256_storeu_ps(oi + d0 + 24, _mm256_mul_ps(o3, vinv));
        }
        for (; d0 + 8 <= D; d0 += 8) {
            __m256 o0 = _mm256_setzero_ps();
            const float* vr = vb + d0;
            for (int64_t t = 0; t < n; ++t, vr += D)
                o0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t), _mm256_loadu_ps(vr), o0);
            _mm256_storeu_ps(oi + d0, _mm256_mul_ps(o0, vinv));
        }
        for (; d0 < D; ++d0) {
            float acc = 0.0f;
            for (int64_t t = 0; t < n; ++t) acc += p[t] * vb[t * D + d0];
            oi[d0] = acc * inv;
        }
    }
}
#else
static void head(const float* qb, const float* kb, const float* vb, float* ob,
                 int64_t S, int64_t D, float scale, float*, float* p) {
    for (int64_t i = 0; i < S; ++i) {
        float m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
            float s = 0.0f;
            for (int64_t d = 0; d < D; ++d) s += qb[i * D + d] * kb[j * D + d];
            p[j] = s * scale;
            m = p[j] > m ? p[j] : m;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j <= i; ++j) { p[j] = std::exp(p[j] - m); sum += p[j]; }
        const float inv = 1.0f / sum;
        for (int64_t d = 0; d < D; ++d) {
            float acc = 0.0f;
            for (int64_t j = 0; j <= i; ++j) acc += p[j] * vb[j * D + d];
            ob[i * D + d] = acc * inv;
        }
    }
}
#endif

extern "C" void kernel(const float* q, const float* k, const float* v, float* o,
                       int64_t BH, int64_t S, int64_t D) {
    if (S <= 0) return;
    const float scale = 1.0f / std::sqrt((float)D);
    const int64_t Sp = (S + 7) / 8 * 8;
    std::vector<float> kT((size_t)(D * Sp));
    std::vector<float> p((size_t)Sp);
    for (int64_t b = 0; b < BH; ++b)
        head(q + b * S * D, k + b * S * D, v + b * S * D, o + b * S * D, S, D, scale,
             kT.data(), p.data());
}
