// Row softmax with three knobs (task.json `knobs`; the `knobs` action prepends their #defines):
//   SIMD       1: `omp simd` on the loops. Without it the compiler may not reorder a float
//              reduction, so the max and the sum stay serial chains, and so does every loop
//              that feeds them.
//   EXP        the exponential: std::exp (a libm call per element, never vectorized here) or
//              exp_poly (range reduction and a polynomial, branch-free, vectorizes).
//   RECOMPUTE  1: the normalize pass recomputes exp instead of reading back the stored value
//              (less memory traffic, twice the exponentials).
#include <cmath>
#include <cstdint>
#include <cstring>

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#if SIMD
#define KG_SIMD_REDUCE(op, var) KG_PRAGMA(omp simd reduction(op : var))
#define KG_SIMD KG_PRAGMA(omp simd)
#else
#define KG_SIMD_REDUCE(op, var)
#define KG_SIMD
#endif

// exp(v) to a few ulp (Cephes expf): v = n ln2 + r with |r| <= ln2 / 2, exp(r) by a polynomial,
// 2^n built in the exponent bits. No floor() call: without -ffast-math g++ keeps floorf a libm
// call, which would stop the loop from vectorizing.
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
    const float n = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round: + 1.5 * 2^23
    const float r = v - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

extern "C" void kernel(const float* x, float* y, int64_t R, int64_t C) {
    for (int64_t r = 0; r < R; ++r) {
        const float* xr = x + r * C;
        float* yr = y + r * C;
        float m = xr[0];
        KG_SIMD_REDUCE(max, m)
        for (int64_t c = 0; c < C; ++c) m = xr[c] > m ? xr[c] : m;
        float sum = 0.0f;
        KG_SIMD_REDUCE(+, sum)
        for (int64_t c = 0; c < C; ++c) {
            const float e = EXP(xr[c] - m);
            if (!RECOMPUTE) yr[c] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        KG_SIMD
        for (int64_t c = 0; c < C; ++c) yr[c] = (RECOMPUTE ? EXP(xr[c] - m) : yr[c]) * inv;
    }
}
