// Linear + multiply by 2 + LeakyReLU(0.1) with four knobs (task.json `knobs`; the `knobs` action
// prepends their #defines). y[m, n] = leaky_relu((x[m, :] . weight[n, :] + bias[n]) * 2, 0.1).
//
// The product runs on register tiles of MR = VW * MV rows of x by NB rows of weight. The tile's
// MR x NB sums live in NB * MV vectors of VW floats, vectors running along m, for the whole k
// loop: each step k broadcasts NB weights weight[n, k] (read in place: each weight row is a
// contiguous stream) and multiplies them into MV vectors x[m0 .. m0 + MR, k]. Each sum still adds
// its k terms in order, like the naive kernel.
// The epilogue (bias, scale, LeakyReLU) is applied to the tile's vectors before they are stored.
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
// Every combination divides the task's sizes (M = 128, N = 1024).
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
                    const vf z = (acc[j][v] + bias[n0 + j]) * 2.0f;
                    const vf r = z >= 0.0f ? z : 0.1f * z;
                    // vectors run along m: the VW results go to VW rows of y
                    for (int l = 0; l < VW; ++l) y[(m0 + VW * v + l) * N + n0 + j] = lane(r, l);
                }
        }
    }
    delete[] xp;
}
