// Gated SiLU, y = a / (1 + exp(-a)) * b, with three knobs (task.json `knobs`; the `knobs`
// action prepends their #defines). 1M elements, 12 MB of traffic: once the exponential is cheap
// the loop is bound by memory bandwidth.
//   EXP    the exponential: std::exp (a libm call per element: the loop cannot vectorize, and the
//          call dominates) or exp_poly (range reduction and a polynomial, branch-free, inlined:
//          the loop vectorizes and becomes memory-bound).
//   WIDTH  0: no pragma, the compiler picks the vector width itself (and versions the loop for
//          aliasing). 4, 8, 16: `omp simd simdlen(WIDTH)`: vectors of 4 floats (SSE, 16 bytes),
//          8 (AVX, 32 bytes) or 16 (AVX-512, 64 bytes); narrower vectors do the same work in
//          more instructions. Only matters when the loop can vectorize (EXP exp_poly).
//   NT     1: write y with non-temporal (streaming) stores, 64 bytes at a time, when the target
//          has AVX-512 (else ignored): the stores bypass the caches and skip reading y's lines
//          before overwriting them, saving a third of the memory traffic. 0: ordinary stores.
// Fast: EXP exp_poly, WIDTH 16 (or 0), NT 1. The default is the starter's loop.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <immintrin.h>

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#if WIDTH
#define KG_SIMD KG_PRAGMA(omp simd simdlen(WIDTH))
#else
#define KG_SIMD
#endif

// exp(v), to ~1 ulp, no libm: v = n ln2 + r with |r| <= ln2 / 2 (v clamped to [-87, 88] so that
// 2^n stays a normal float), exp(r) = 1 + r + r^2 Q(r) with Q a degree-4 least-squares fit on
// Chebyshev nodes (relative error ~2e-8), 2^n written into the exponent bits. No floor() call:
// without -ffast-math it stays a libm call and would stop the loop from vectorizing.
static inline float exp_poly(float v) {
    // Clamp v to [-87, 88] so that 2^n stays a normal float. On the bits: a float compare may
    // trap, so g++ makes a float select vector code only where AVX-512 masks it; an integer min
    // vectorizes on every x86. As signed integers, float bits grow with a positive value and with
    // a negative value's magnitude: one min against each sign's bound.
    int32_t vb;
    std::memcpy(&vb, &v, sizeof(vb));
    const int32_t bound = vb < 0 ? -1028784128 /* -87.0f */ : 1118830592 /* 88.0f */;
    vb = vb < bound ? vb : bound;
    std::memcpy(&v, &vb, sizeof(v));
    const float n = (v * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest integer
    const float r = (v - n * 0.693145751953125f) - n * 1.42860677e-6f;  // ln2 = hi + lo, hi exact * n
    float q = 1.39464466e-3f;
    q = q * r + 8.36915169e-3f;
    q = q * r + 4.16662631e-2f;
    q = q * r + 1.66665160e-1f;
    q = q * r + 5.00000008e-1f;
    const float e = (q * r) * r + r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return e * scale;
}

static inline float silu_mul(float x, float g) { return x / (1.0f + EXP(-x)) * g; }

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {
    int64_t start = 0;
#if NT && defined(__AVX512F__)
    // Scalar head up to a 64-byte boundary of y, then blocks of 16 computed into an aligned
    // buffer and streamed out; the tail is left to the loop below.
    while (start < N && (reinterpret_cast<uintptr_t>(y + start) & 63) != 0) {
        y[start] = silu_mul(a[start], b[start]);
        ++start;
    }
    for (; start + 16 <= N; start += 16) {
        alignas(64) float t[16];
        KG_SIMD
        for (int j = 0; j < 16; ++j) t[j] = silu_mul(a[start + j], b[start + j]);
        _mm512_stream_ps(y + start, _mm512_load_ps(t));
    }
    _mm_sfence();  // streaming stores are weakly ordered: complete them before returning
#endif
    KG_SIMD
    for (int64_t i = start; i < N; ++i) y[i] = silu_mul(a[i], b[i]);
}
