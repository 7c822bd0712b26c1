// Linear + divide by 10 + exact (erf) GELU with five knobs (task.json `knobs`; the `knobs` action
// prepends their #defines). v = (x[m, :] . weight[n, :] + bias[n]) / 10,
// y[m, n] = 0.5 * v * (1 + erf(v / sqrt(2))).
//
// The product runs on register tiles of MR = VW * MV rows of x by NB rows of weight. The tile's
// MR x NB sums live in NB * MV vectors of VW floats, vectors running along m, for the whole k
// loop: each step k broadcasts NB weights weight[n, k] (read in place: each weight row is a
// contiguous stream) and multiplies them into MV vectors x[m0 .. m0 + MR, k]. Each sum still adds
// its k terms in order, like the naive kernel.
// The epilogue (bias, divide, GELU) is applied to the tile's vectors before they are stored.
//   VW    lanes per vector: 1 (scalar code, one output per FMA) or 8 (one 256-bit FMA computes 8
//         outputs of 8 consecutive rows).
//   PACK  1: copy x once into k-major panels, xp[k][i] = x[m0 + i, k], so that the vectors of a
//         step are contiguous loads. 0: with VW = 8 every vector of x is assembled, every step,
//         from 8 scalar loads of 8 different rows of x (x is row-major), and the loads dominate.
//   MV    vectors of x per tile: each weight broadcast is reused MV times, and the weight matrix
//         is streamed from memory or cache M / MR times in all.
//   NB    rows of weight per tile: each vector of x loaded is reused NB times. The NB * MV sums are
//         independent FMA chains: with NB = MV = 1 every step waits for the previous FMA
//         (latency bound); NB * MV = 32 no longer fits the vector registers with the operands.
//   ERF   the erf of the GELU: erf_libm (VW calls of std::erf, never vectorized: M * N calls, a
//         large share of the time once the product is fast) or erf_poly (a rational-polynomial
//         form with a polynomial exp: branch-free vector arithmetic, error ~3e-7).
// Every combination divides the task's sizes (M = 256, N = 1024).
#include <cmath>
#include <cstdint>
#include <cstring>

#if VW == 1
typedef float vf;  // one lane: plain scalar code
typedef int32_t vi;
static inline float lane(vf v, int) { return v; }
static inline void set_lane(vf& v, int, float s) { v = s; }
static inline vi to_int(vf v) { return static_cast<vi>(v); }
static inline vf bits_to_float(vi b) {
    vf f;
    std::memcpy(&f, &b, sizeof(f));
    return f;
}
#else
typedef float vf __attribute__((vector_size(4 * VW)));    // VW floats (GCC vector extension)
typedef int32_t vi __attribute__((vector_size(4 * VW)));  // VW int32
static inline float lane(vf v, int l) { return v[l]; }
static inline void set_lane(vf& v, int l, float s) { v[l] = s; }
static inline vi to_int(vf v) { return __builtin_convertvector(v, vi); }
static inline vf bits_to_float(vi b) { return (vf)b; }  // same-size vector cast: the bits
#endif
#define MR (VW * MV)  // rows of x per tile

static inline vf loadv(const float* p) {
    vf v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

static inline void storev(float* p, vf v) { std::memcpy(p, &v, sizeof(v)); }

static inline vf splat(float s) { return vf{} + s; }

// exp(v) = 2^n exp(r), n = round(v / ln2), r = v - n ln2 (ln2 in two parts, so that n * ln2_hi is
// exact), exp(r) on |r| <= ln2 / 2 by a degree-6 polynomial fitted to it (Chebyshev fit, error
// ~2e-9), 2^n written into the exponent bits. v is clamped to [-87, 88] so that 2^n stays a
// normal float. Total error ~1e-7 relative.
static inline vf exp_poly(vf v) {
    v = v < -87.0f ? splat(-87.0f) : v;
    v = v > 88.0f ? splat(88.0f) : v;
    const vf n = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round: + 1.5 * 2^23
    const vf r = (v - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
    vf p = splat(1.3941108434e-3f);
    p = p * r + 8.3751263982e-3f;
    p = p * r + 4.1666352897e-2f;
    p = p * r + 1.6666415515e-1f;
    p = p * r + 5.0000000471e-1f;
    p = p * r + 1.0000000377f;
    p = p * r + 1.0f;
    return p * bits_to_float((to_int(n) + 127) << 23);
}

static inline vf exp_libm(vf v) {
    vf r = vf{};
    for (int l = 0; l < VW; ++l) set_lane(r, l, std::exp(lane(v, l)));
    return r;
}

// erf(z) for z >= 0: 1 - t P(t) exp(-z^2) with t = 1 / (1 + z / 2) and P of degree 8, fitted
// (Chebyshev) to erfc(z) exp(z^2) / t on z in [0, 4], error < 1e-8; z is clamped to 4
// (erf(4) = 1 - 2e-8) and erf is odd. Rounding makes it ~3e-7 absolute near 0, which GELU's
// 1 + erf absorbs.
static inline vf erf_poly(vf z) {
    vf a = z < 0.0f ? -z : z;
    a = a > 4.0f ? splat(4.0f) : a;
    const vf t = 1.0f / (1.0f + 0.5f * a);
    vf p = splat(-4.00200436293e-2f);
    p = p * t + 1.8521330265e-1f;
    p = p * t - 2.64933861154e-1f;
    p = p * t - 1.12940032648e-4f;
    p = p * t + 1.86208842578e-1f;
    p = p * t + 1.00843024514e-1f;
    p = p * t + 2.72849266355e-1f;
    p = p * t + 2.77528666519e-1f;
    p = p * t + 2.8242373483e-1f;
    const vf r = 1.0f - t * p * exp_poly(-a * a);
    return z < 0.0f ? -r : r;
}

static inline vf erf_libm(vf z) {
    vf r = vf{};
    for (int l = 0; l < VW; ++l) set_lane(r, l, std::erf(lane(z, l)));
    return r;
}

#if PACK
// xp[m0 * K + k * MR + i] = x[m0 + i, k]: each block of MR rows of x as a k-major panel.
static void pack_rows(const float* x, float* xp, int64_t M, int64_t K) {
    for (int64_t m0 = 0; m0 < M; m0 += MR)
        for (int64_t k = 0; k < K; ++k)
            for (int i = 0; i < MR; ++i) xp[m0 * K + k * MR + i] = x[(m0 + i) * K + k];
}
#endif

// acc[j][v][l] = sum_k a(VW * v + l, k) * b[j * K + k] for the MR rows of an m-block of A, which
// is a k-major panel (PACK 1: a[k * MR + i]) or row-major with row stride lda (PACK 0:
// a[i * lda + k]).
__attribute__((always_inline)) static inline void product(vf (&acc)[NB][MV], const float* a,
                                                          int64_t lda, const float* b, int64_t K) {
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
        for (int v = 0; v < MV; ++v) acc[j][v] = vf{};
    for (int64_t k = 0; k < K; ++k) {
        vf av[MV];
#pragma GCC unroll 4
        for (int v = 0; v < MV; ++v) {
#if PACK
            (void)lda;
            av[v] = loadv(a + k * MR + VW * v);
#else
            vf t = vf{};
            for (int l = 0; l < VW; ++l) set_lane(t, l, a[(VW * v + l) * lda + k]);
            av[v] = t;
#endif
        }
#pragma GCC unroll 8
        for (int j = 0; j < NB; ++j) {
            const float w = b[j * K + k];
#pragma GCC unroll 4
            for (int v = 0; v < MV; ++v) acc[j][v] += w * av[v];
        }
    }
}

extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    float* xp = nullptr;
#if PACK
    xp = new float[M * K];
    pack_rows(x, xp, M, K);
#endif
    for (int64_t m0 = 0; m0 < M; m0 += MR) {
        const float* a = PACK ? xp + m0 * K : x + m0 * K;
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
            vf acc[NB][MV];
            product(acc, a, K, weight + n0 * K, K);
#pragma GCC unroll 8
            for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
                for (int v = 0; v < MV; ++v) {
                    const vf z = (acc[j][v] + bias[n0 + j]) / 10.0f;
                    const vf r = 0.5f * z * (1.0f + ERF(z * 0.70710678118654752f));
                    // vectors run along m: the VW results go to VW rows of y
                    for (int l = 0; l < VW; ++l) y[(m0 + VW * v + l) * N + n0 + j] = lane(r, l);
                }
        }
    }
    delete[] xp;
}
