#include <cmath>
#include <cstdint>
#include <immintrin.h>

// Row softmax with AVX2/FMA: vector max (4 independent accumulators),
// vectorized polynomial exp fused with the sum, then a multiply by 1/sum.
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
#endif

extern "C" void kernel(const float* x, float* y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = x + r * C;
        float* yr = y + r * C;
        int64_t c = 0;
        float m = -INFINITY;
#if defined(__AVX2__) && defined(__FMA__)
        __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
        for (; c + 32 <= C; c += 32) {
            m0 = _mm256_max_ps(m0, _mm256_loadu_ps(xr + c));
            m1 = _mm256_max_ps(m1, _mm256_loadu_ps(xr + c + 8));
            m2 = _mm256_max_ps(m2, _mm256_loadu_ps(xr + c + 16));
            m3 = _mm256_max_ps(m3, _mm256_loadu_ps(xr + c + 24));
        }
        for (; c + 8 <= C; c += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(xr + c));
        m = hmax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
#endif
        for (; c < C; ++c) m = xr[c] > m ? xr[c] : m;

        c = 0;
        float sum = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
        const __m256 vm = _mm256_set1_ps(m);
        __m256 s0 = _mm256_setzero_ps(), s1 = s0;
        for (; c + 16 <= C; c += 16) {
            __m256 e0 = exp256(_mm256_sub_ps(_mm256_loadu_ps(xr + c), vm));
            __m256 e1 = exp256(_mm256_sub_ps(_mm256_loadu_ps(xr + c + 8), vm));
            _mm256_storeu_ps(yr + c, e0);
            _mm256_storeu_ps(yr + c + 8, e1);
            s0 = _mm256_add_ps(s0, e0);
            s1 = _mm256_add_ps(s1, e1);
        }
        for (; c + 8 <= C; c += 8) {
            __m256 e0 = exp256(_mm256_sub_ps(_mm256_loadu_ps(xr + c), vm));
            _mm256_storeu_ps(yr + c, e0);
            s0 = _mm256_add_ps(s0, e0);
        }
        sum = hsum(_mm256_add_ps(s0, s1));
#endif
        for (; c < C; ++c) {
            float e = std::exp(xr[c] - m);
            yr[c] = e;
            sum += e;
        }

        const float inv = 1.0f / sum;
        c = 0;
#if defined(__AVX2__) && defined(__FMA__)
        const __m256 vinv = _mm256_set1_ps(inv);
        for (; c + 8 <= C; c += 8)
            _mm256_storeu_ps(yr + c, _mm256_mul_ps(_mm256_loadu_ps(yr + c), vinv));
#endif
        for (; c < C; ++c) yr[c] *= inv;
    }
}
