// Linear (weight[N, K], nn.Linear layout) + Mish + Mish: y[m, n] = mish(mish(x[m] . weight[n] +
// bias[n])), with five knobs (task.json `knobs`; the `knobs` action prepends their #defines).
// The kernel walks blocks of NB output columns (= NB rows of weight); inside a block, groups of
// MR rows of x; each group accumulates an MR x NB tile in a local array, then adds the bias and
// applies Mish twice while the tile is hot (fused epilogue).
//   ORDER  1: "jk" order, the starter's loop: one dot product x[m] . weight[n] per output. Both
//          rows are contiguous, but without SIMD the sum is one serial chain of dependent FMAs
//          (bound by FMA latency). 0: "kj" order: weight's column block is first copied
//          transposed into a [K][NB] panel; then for each k, broadcast x[m, k] and add
//          x[m, k] * panel[k, :] into the tile: the innermost loop runs over columns and
//          vectorizes without reordering any sum.
//   MR     rows of x per tile (1 or 4): every weight value loaded is used MR times, so loads per
//          flop fall by MR; in jk order the MR sums are also independent chains.
//   NB     tile width in columns (16, 64, 256). 64 with MR 4: the kj tile fits in the vector
//          registers. 16: too narrow, vectorized poorly. 256: the tile lives in L1 and is
//          loaded and stored at every k. (Little effect on ORDER 1.)
//   SIMD   1: `omp simd reduction` on the jk dot product: lets the compiler split each sum into
//          vector lanes (another summation order, within the tolerance). Without it a float
//          reduction stays a serial chain. No effect on ORDER 0, which has no reduction.
//   MISH   0: v * tanh(log1p(exp(v))) with libm (three calls per Mish, six per output, one
//          element at a time: the epilogue cannot vectorize). 1: mish_poly below: the same
//          function rewritten with one exp (a polynomial) and one division, branch-free, it
//          vectorizes. Once the GEMM is fast, libm is a large share of the time.
// Fast: ORDER 0, MR 4, NB 64, MISH 1. The default is the starter's loops.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#if SIMD
#define KG_SIMD_REDUCE(op, ...) KG_PRAGMA(omp simd reduction(op : __VA_ARGS__))
#else
#define KG_SIMD_REDUCE(op, ...)
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
// mish(v) = v tanh(log(1 + e^v)). With u = e^v, tanh(log(1 + u)) = ((1+u)^2 - 1) / ((1+u)^2 + 1)
// = n / (n + 2), n = u (u + 2): one exp and one division. v is clamped at 20 inside the exp (where
// n / (n + 2) is 1 to float precision) so that n cannot overflow.
static inline float mish_poly(float v) {
    const float u = exp_poly(v < 20.0f ? v : 20.0f);
    const float n = u * (u + 2.0f);
    return v * (n / (n + 2.0f));
}

#if MISH
#define MISH_F(v) mish_poly(v)
#else
#define MISH_F(v) ((v) * std::tanh(std::log1p(std::exp(v))))
#endif

// One MR x nb tile: rows a[0..MR) of x, columns [0, nb) of the block. `b` is the [K][NB] panel
// for ORDER 0 and weight + j0 * K (rows of K) for ORDER 1.
static inline void tile(const float* const* a, const float* b, float (*acc)[NB], int64_t nb,
                        int64_t K) {
#if ORDER == 0
    for (int r = 0; r < MR; ++r)
        for (int64_t j = 0; j < nb; ++j) acc[r][j] = 0.0f;
    for (int64_t k = 0; k < K; ++k)
        for (int r = 0; r < MR; ++r) {
            const float ak = a[r][k];
            for (int64_t j = 0; j < nb; ++j) acc[r][j] += ak * b[k * NB + j];
        }
#else
    // Up to four scalar sums (a reduction over an array would stay in order in g++).
    const float* a0 = a[0];
    const float* a1 = a[MR > 1 ? 1 : 0];
    const float* a2 = a[MR > 2 ? 2 : 0];
    const float* a3 = a[MR > 3 ? 3 : 0];
    for (int64_t j = 0; j < nb; ++j) {
        const float* wj = b + j * K;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        KG_SIMD_REDUCE(+, s0, s1, s2, s3)
        for (int64_t k = 0; k < K; ++k) {
            s0 += a0[k] * wj[k];
            if (MR > 1) s1 += a1[k] * wj[k];
            if (MR > 2) s2 += a2[k] * wj[k];
            if (MR > 3) s3 += a3[k] * wj[k];
        }
        acc[0][j] = s0;
        if (MR > 1) acc[MR > 1 ? 1 : 0][j] = s1;
        if (MR > 2) acc[MR > 2 ? 2 : 0][j] = s2;
        if (MR > 3) acc[MR > 3 ? 3 : 0][j] = s3;
    }
#endif
}

extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    std::vector<float> panel(ORDER == 0 ? K * NB : 0);
    alignas(64) float acc[MR][NB];
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
        const int64_t nb = std::min<int64_t>(NB, N - j0);
        const float* b = weight + j0 * K;
        if (ORDER == 0) {
            for (int64_t j = 0; j < nb; ++j)
                for (int64_t k = 0; k < K; ++k) panel[k * NB + j] = b[j * K + k];
            b = panel.data();
        }
        for (int64_t i0 = 0; i0 < M; i0 += MR) {
            // Rows past M (when MR does not divide M) repeat the last row and are not stored.
            const float* arow[MR];
            for (int r = 0; r < MR; ++r) arow[r] = x + std::min<int64_t>(i0 + r, M - 1) * K;
            if (nb == NB) tile(arow, b, acc, NB, K);  // constant width: unrolled, vectorized
            else tile(arow, b, acc, nb, K);
            for (int r = 0; r < MR && i0 + r < M; ++r) {
                float* yr = y + (i0 + r) * N + j0;
                for (int64_t j = 0; j < nb; ++j) {
                    const float v = acc[r][j] + bias[j0 + j];
                    const float once = MISH_F(v);
                    yr[j] = MISH_F(once);
                }
            }
        }
    }
}
