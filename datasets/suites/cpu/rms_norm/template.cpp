// RMSNorm, y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + 1e-6) * w[c], with three knobs
// (task.json `knobs`; the `knobs` action prepends their #defines). Per row: a sum of squares
// (a reduction), then a scaling pass over the row (still in L1). 8 MB of traffic: once the
// reduction is no longer a serial chain the kernel is bound by memory bandwidth.
//   SIMD   1: `omp simd` on the loops. With ACC 1 it is a `reduction`: it lets the compiler split
//          the sum of squares into vector lanes (another summation order, within the tolerance);
//          without it a float sum may not be reordered and stays one chain of dependent adds
//          (bound by add latency). With ACC > 1 it vectorizes the update of the partials.
//   ACC    independent partial sums kept by hand (1, 4, 16): element c goes to partial c % ACC
//          and the partials are added at the end. Breaks the dependency chain without any
//          pragma; with 16 partials the compiler can hold them in one vector and vectorize the
//          loop (each lane is its own in-order sum, so no reordering permission is needed).
//   NT     1: write y with non-temporal (streaming) stores, 64 bytes at a time, when the target
//          has AVX-512 (else ignored): the stores bypass the caches and skip reading y's lines
//          before overwriting them, saving a third of the memory traffic. 0: ordinary stores.
// Fast: SIMD 1 (or ACC 16), NT 1. The default is the starter's loops.
#include <cmath>
#include <cstdint>
#include <immintrin.h>

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#if SIMD
#define KG_SIMD_REDUCE(op, ...) KG_PRAGMA(omp simd reduction(op : __VA_ARGS__))
#define KG_SIMD KG_PRAGMA(omp simd)
#else
#define KG_SIMD_REDUCE(op, ...)
#define KG_SIMD
#endif

// Sum of squares of xr[0..C).
static inline float sum_squares(const float* xr, int64_t C) {
#if ACC == 1
    float ss = 0.0f;
    KG_SIMD_REDUCE(+, ss)
    for (int64_t c = 0; c < C; ++c) ss += xr[c] * xr[c];
    return ss;
#else
    float part[ACC] = {};
    int64_t c = 0;
    for (; c + ACC <= C; c += ACC) {
        KG_SIMD
        for (int u = 0; u < ACC; ++u) part[u] += xr[c + u] * xr[c + u];
    }
    float ss = 0.0f;
    for (; c < C; ++c) ss += xr[c] * xr[c];  // tail, when ACC does not divide C
    for (int u = 0; u < ACC; ++u) ss += part[u];
    return ss;
#endif
}

extern "C" void kernel(const float* x, const float* w, float* y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = x + r * C;
        float* yr = y + r * C;
        const float inv = 1.0f / std::sqrt(sum_squares(xr, C) / (float)C + 1e-6f);
        int64_t c = 0;
#if NT && defined(__AVX512F__)
        // Scalar head up to a 64-byte boundary of the row, then streaming stores of 16.
        for (; c < C && (reinterpret_cast<uintptr_t>(yr + c) & 63) != 0; ++c)
            yr[c] = xr[c] * inv * w[c];
        const __m512 vinv = _mm512_set1_ps(inv);
        for (; c + 16 <= C; c += 16) {
            const __m512 xv = _mm512_mul_ps(_mm512_loadu_ps(xr + c), vinv);
            _mm512_stream_ps(yr + c, _mm512_mul_ps(xv, _mm512_loadu_ps(w + c)));
        }
#endif
        KG_SIMD
        for (int64_t k = c; k < C; ++k) yr[k] = xr[k] * inv * w[k];
    }
#if NT && defined(__AVX512F__)
    _mm_sfence();  // streaming stores are weakly ordered: complete them before returning
#endif
}
