// Linear (weight[N, K], nn.Linear layout) + bias + ReLU: y[m, n] = max(0, x[m] . weight[n] +
// bias[n]), with five knobs (task.json `knobs`; the `knobs` action prepends their #defines).
// The kernel walks blocks of NB output columns (= NB rows of weight); inside a block, groups of
// MR rows of x; each group accumulates an MR x NB tile in a local array, then adds the bias and
// applies the ReLU while the tile is still hot (fused epilogue).
//   ORDER  1: "jk" order, the starter's loop: one dot product x[m] . weight[n] per output. Both
//          rows are contiguous, but without SIMD the sum is one serial chain of dependent FMAs
//          (bound by FMA latency). 0: "kj" order: for each k, broadcast x[m, k] and add
//          x[m, k] * weight[block, k] into the tile; the innermost loop runs over the columns j,
//          which vectorizes without reordering any sum, but needs weight transposed (PACK 1):
//          unpacked, weight[j, k] for consecutive j is K floats apart, one cache line per value.
//   MR     rows of x per tile (1 or 4): every weight value loaded is used MR times, so loads per
//          flop fall by MR; in jk order the MR sums are also independent chains.
//   NB     tile width in columns (16, 64, 256). 64 with MR 4: the kj tile fits in the vector
//          registers. 16: too narrow, vectorized poorly. 256: the tile lives in L1 and is
//          loaded and stored at every k.
//   PACK   1: copy the K x NB block of weight into a contiguous buffer once per column block,
//          transposed to [K][NB] for ORDER 0 (the layout the kj loop wants); for ORDER 1 it is
//          a plain copy of rows that are already contiguous, so it only costs.
//   SIMD   1: `omp simd reduction` on the jk dot product: lets the compiler split each sum into
//          vector lanes (another summation order, within the tolerance). No effect on ORDER 0,
//          which has no reduction.
// Fast: ORDER 0, MR 4, NB 64, PACK 1 (or ORDER 1 with SIMD 1 and MR 4). The default is the
// starter's loop.
#include <algorithm>
#include <cstdint>
#include <vector>

#define KG_STR(x) #x
#define KG_PRAGMA(x) _Pragma(KG_STR(x))
#if SIMD
#define KG_SIMD_REDUCE KG_PRAGMA(omp simd reduction(+ : s0, s1, s2, s3))
#else
#define KG_SIMD_REDUCE
#endif

// Element (k, j) of the current column block of weight^T, as the tile reads it: unpacked,
// weight itself (b = weight + j0 * K); packed, the panel, [K][NB] for ORDER 0 and [NB][K] for 1.
#if PACK && ORDER == 0
#define W_AT(k, j) b[(k) * NB + (j)]
#else
#define W_AT(k, j) b[(j) * K + (k)]
#endif

// One MR x nb tile of y: rows a[0..MR) of x, columns [0, nb) of the block b.
static inline void tile(const float* const* a, const float* b, float (*acc)[NB], int64_t nb,
                        int64_t K) {
#if ORDER == 0
    for (int r = 0; r < MR; ++r)
        for (int64_t j = 0; j < nb; ++j) acc[r][j] = 0.0f;
    for (int64_t k = 0; k < K; ++k)
        for (int r = 0; r < MR; ++r) {
            const float ak = a[r][k];
            for (int64_t j = 0; j < nb; ++j) acc[r][j] += ak * W_AT(k, j);
        }
#else
    // Up to four scalar sums (a reduction over an array would stay in order in g++).
    const float* a0 = a[0];
    const float* a1 = a[MR > 1 ? 1 : 0];
    const float* a2 = a[MR > 2 ? 2 : 0];
    const float* a3 = a[MR > 3 ? 3 : 0];
    for (int64_t j = 0; j < nb; ++j) {
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        KG_SIMD_REDUCE
        for (int64_t k = 0; k < K; ++k) {
            const float wk = W_AT(k, j);
            s0 += a0[k] * wk;
            if (MR > 1) s1 += a1[k] * wk;
            if (MR > 2) s2 += a2[k] * wk;
            if (MR > 3) s3 += a3[k] * wk;
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
    std::vector<float> panel(PACK ? K * NB : 0);
    alignas(64) float acc[MR][NB];
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
        const int64_t nb = std::min<int64_t>(NB, N - j0);
        const float* b = weight + j0 * K;
        if (PACK) {
            for (int64_t j = 0; j < nb; ++j)
                for (int64_t k = 0; k < K; ++k) {
                    if (ORDER == 0) panel[k * NB + j] = b[j * K + k];
                    else panel[j * K + k] = b[j * K + k];
                }
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
                    yr[j] = v > 0.0f ? v : 0.0f;
                }
            }
        }
    }
}
