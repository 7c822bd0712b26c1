// Linear + sigmoid + Linear + logsumexp over the outputs with five knobs (task.json `knobs`; the
// `knobs` action prepends their #defines). h[m, j] = sigmoid(x[m, :] . weight1[j, :] + bias1[j]),
// z[m, n] = h[m, :] . weight2[n, :] + bias2[n], y[m] = log(sum_n exp(z[m, n])).
//
// The product runs on register tiles of MR = VW * MV rows of x by NB rows of a weight. The tile's
// MR x NB sums live in NB * MV vectors of VW floats, vectors running along m, for the whole k
// loop: each step k broadcasts NB weights weight[n, k] (read in place: each weight row is a
// contiguous stream) and multiplies them into MV vectors x[m0 .. m0 + MR, k]. Each sum still adds
// its k terms in order, like the naive kernel.
// Both products use the same tiles. The rows are processed in blocks of MR: layer 1 of the block
// goes into a small buffer hb (MR x H, in cache) that is then the A operand of layer 2, whose
// results go into zt[n][i] (MR x N); the logsumexp of the block's rows is then taken VW rows at a
// time (max, exp and sum, log).
//   VW    lanes per vector: 1 (scalar code, one output per FMA) or 8 (one 256-bit FMA computes 8
//         outputs of 8 consecutive rows).
//   PACK  1: copy x once into k-major panels, xp[k][i] = x[m0 + i, k], and write hb as one too
//         (hb[j][i]), so that the vectors of a step are contiguous loads in both products. 0: x
//         and hb are row-major, and with VW = 8 every vector is assembled, every step, from 8
//         scalar loads of 8 different rows: the loads dominate.
//   MV    vectors of x per tile: each weight broadcast is reused MV times, and each weight matrix
//         is streamed from memory or cache M / MR times in all.
//   NB    rows of the weight per tile: each vector of x loaded is reused NB times. The NB * MV
//         sums are independent FMA chains: with NB = MV = 1 every step waits for the previous FMA
//         (latency bound); NB * MV = 32 no longer fits the vector registers with the operands.
//   EXP   the exp of the sigmoid (M * H calls: a sizeable share of the time once the products are
//         fast) and of the logsumexp: exp_libm (VW calls of std::exp, never vectorized) or
//         exp_poly (range reduction and a polynomial: branch-free vector arithmetic, error ~1e-7).
// Every combination divides the task's sizes (M = 512, H = 1024, N = 256).
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

extern "C" void kernel(const float* x, const float* weight1, const float* bias1,
                       const float* weight2, const float* bias2, float* y,
                       int64_t M, int64_t K, int64_t H, int64_t N) {
    float* xp = nullptr;
#if PACK
    xp = new float[M * K];
    pack_rows(x, xp, M, K);
#endif
    // layer 1 of a block of rows: hb[j * MR + i] (PACK 1) or hb[i * H + j] (PACK 0)
    float* hb = new float[MR * H];
    float* zt = new float[N * MR];  // layer 2 of the block: zt[n * MR + i]
    for (int64_t m0 = 0; m0 < M; m0 += MR) {
        const float* a = PACK ? xp + m0 * K : x + m0 * K;
        for (int64_t j0 = 0; j0 < H; j0 += NB) {
            vf acc[NB][MV];
            product(acc, a, K, weight1 + j0 * K, K);
#pragma GCC unroll 8
            for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
                for (int v = 0; v < MV; ++v) {
                    const vf h = 1.0f / (1.0f + EXP(-(acc[j][v] + bias1[j0 + j])));
#if PACK
                    storev(hb + (j0 + j) * MR + VW * v, h);
#else
                    for (int l = 0; l < VW; ++l) hb[(VW * v + l) * H + j0 + j] = lane(h, l);
#endif
                }
        }
        for (int64_t n0 = 0; n0 < N; n0 += NB) {
            vf acc[NB][MV];
            product(acc, hb, H, weight2 + n0 * H, H);
#pragma GCC unroll 8
            for (int j = 0; j < NB; ++j)
#pragma GCC unroll 4
                for (int v = 0; v < MV; ++v)
                    storev(zt + (n0 + j) * MR + VW * v, acc[j][v] + bias2[n0 + j]);
        }
        for (int v = 0; v < MV; ++v) {
            vf mx = loadv(zt + VW * v);
            for (int64_t n = 1; n < N; ++n) {
                const vf z = loadv(zt + n * MR + VW * v);
                mx = z > mx ? z : mx;
            }
            vf s = vf{};
            for (int64_t n = 0; n < N; ++n) s += EXP(loadv(zt + n * MR + VW * v) - mx);
            for (int l = 0; l < VW; ++l) y[m0 + VW * v + l] = lane(mx, l) + std::log(lane(s, l));
        }
    }
    delete[] xp;
    delete[] hb;
    delete[] zt;
}
