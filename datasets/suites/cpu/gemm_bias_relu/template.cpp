// GEMM + bias + ReLU, y = max(0, A B + bias), with five knobs (task.json `knobs`; the `knobs`
// action prepends their #defines). The kernel walks blocks of NB columns of y; inside a block,
// groups of MR rows of A; each group accumulates an MR x NB tile in a local array, then adds the
// bias and applies the ReLU while the tile is still hot (fused epilogue).
//   ORDER  0: "kj" order: for each k, broadcast A[i, k] and add A[i, k] * B[k, block] into the
//          tile. The innermost loop runs over j, contiguous in B and in the tile, and vectorizes
//          without reordering any sum: the fast order. 1: "jk" order, the textbook loop: one dot
//          product over k per output, B read down a column (stride N), and without SIMD the sum
//          is one serial chain of dependent FMAs (bound by FMA latency, not throughput).
//   MR     rows of A per tile (1 or 4): every B value loaded is used MR times, so loads per
//          flop fall by MR; in jk order the MR sums are also independent chains.
//   NB     tile width in columns (16, 64, 256). 64 with MR 4: the tile fits in the vector
//          registers. 16: too narrow, the compiler vectorizes it poorly. 256 = a whole row: the
//          tile lives in L1 and is loaded and stored at every k.
//   PACK   1: copy the K x NB panel of B into a contiguous buffer once per column block (rows of
//          NB for ORDER 0; transposed for ORDER 1, so the dot product reads it with stride 1):
//          fewer cache lines and no L1 set conflicts (a stride of N = 256 floats maps every row
//          onto the same few cache sets). Paid once per panel, reused by all M rows.
//   SIMD   1: `omp simd reduction` on the jk dot product: lets the compiler split each sum into
//          vector lanes (another summation order, within the tolerance); needs PACK for unit
//          stride, else the lanes are gathers. No effect on ORDER 0, which has no reduction.
// Fast: ORDER 0, MR 4, NB 64, PACK 1. The default is the textbook loop.
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

// B element (k, j) of the current column block, as the tile reads it. Unpacked: B itself
// (row stride N). Packed: the panel, row-major [K][NB] for ORDER 0, column-major [NB][K] for
// ORDER 1 (so that both orders read the panel with stride 1 in their innermost loop).
#if !PACK
#define B_AT(k, j) b[(k) * N + (j)]
#elif ORDER == 0
#define B_AT(k, j) b[(k) * NB + (j)]
#else
#define B_AT(k, j) b[(j) * K + (k)]
#endif

// One MR x nb tile of y: rows a[0..MR) of A, columns [0, nb) of the block b.
static inline void tile(const float* const* a, const float* b, float (*acc)[NB], int64_t nb,
                        int64_t N, int64_t K) {
    for (int r = 0; r < MR; ++r)
        for (int64_t j = 0; j < nb; ++j) acc[r][j] = 0.0f;
#if ORDER == 0
    for (int64_t k = 0; k < K; ++k)
        for (int r = 0; r < MR; ++r) {
            const float ak = a[r][k];
            for (int64_t j = 0; j < nb; ++j) acc[r][j] += ak * B_AT(k, j);
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
            const float bk = B_AT(k, j);
            s0 += a0[k] * bk;
            if (MR > 1) s1 += a1[k] * bk;
            if (MR > 2) s2 += a2[k] * bk;
            if (MR > 3) s3 += a3[k] * bk;
        }
        acc[0][j] = s0;
        if (MR > 1) acc[MR > 1 ? 1 : 0][j] = s1;
        if (MR > 2) acc[MR > 2 ? 2 : 0][j] = s2;
        if (MR > 3) acc[MR > 3 ? 3 : 0][j] = s3;
    }
#endif
}

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    std::vector<float> panel(PACK ? K * NB : 0);
    alignas(64) float acc[MR][NB];
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
        const int64_t nb = std::min<int64_t>(NB, N - j0);
        const float* b = B + j0;
        if (PACK) {
            for (int64_t k = 0; k < K; ++k)
                for (int64_t j = 0; j < nb; ++j) {
                    if (ORDER == 0) panel[k * NB + j] = B[k * N + j0 + j];
                    else panel[j * K + k] = B[k * N + j0 + j];
                }
            b = panel.data();
        }
        for (int64_t i0 = 0; i0 < M; i0 += MR) {
            // Rows past M (when MR does not divide M) repeat the last row and are not stored.
            const float* arow[MR];
            for (int r = 0; r < MR; ++r) arow[r] = A + std::min<int64_t>(i0 + r, M - 1) * K;
            if (nb == NB) tile(arow, b, acc, NB, N, K);  // constant width: unrolled, vectorized
            else tile(arow, b, acc, nb, N, K);
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
