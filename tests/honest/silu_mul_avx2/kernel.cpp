#include <cmath>
#include <cstdint>
#include <immintrin.h>

// Gated SiLU with an AVX2/FMA vectorized exp (Cephes-style polynomial,
// ~1-2 ulp), 16 elements per iteration, scalar tail. Falls back to plain
// scalar code when AVX2/FMA are not available.

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

static inline __m256 silu_mul8(__m256 a, __m256 b) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), a));
    __m256 s = _mm256_div_ps(a, _mm256_add_ps(one, e));
    return _mm256_mul_ps(s, b);
}
#endif

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
    for (; i + 16 <= N; i += 16) {
        __m256 r0 = silu_mul8(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        __m256 r1 = silu_mul8(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
        _mm256_storeu_ps(y + i, r0);
        _mm256_storeu_ps(y + i + 8, r1);
    }
    for (; i + 8 <= N; i += 8)
        _mm256_storeu_ps(y + i, silu_mul8(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
#endif
    for (; i < N; ++i) {
        float x = a[i];
        y[i] = x / (1.0f + std::exp(-x)) * b[i];
    }
}
