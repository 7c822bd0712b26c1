// Causal attention, o[b, i] = sum_{j <= i} softmax_j(q[b, i] . k[b, j] / sqrt(D)) v[b, j], with
// four knobs (task.json `knobs`; the `knobs` action prepends their #defines). Per head, blocks of
// BQ query rows: scores against keys 0 .. last row of the block, a softmax per row (keys past
// the row get probability 0), then o = p v accumulated in registers, BQ rows x 64 columns.
//   KT     0: each score is a dot product q[i] . k[j] over D (a reduction: a serial chain unless
//          SIMD). 1: k of the head is first transposed into a [D][S] buffer; the scores are then
//          built in register tiles of BQ rows x 64 keys as sum_d q[i, d] * kT[d, j-chunk]: the
//          innermost loop runs over keys, contiguous, and vectorizes without reordering sums.
//   BQ     query rows per block (1 or 4): each key and value row loaded is used BQ times, and
//          with KT 0 the BQ dot products are independent chains.
//   SIMD   1: `omp simd reduction` on the dot products (KT 0) and on the softmax's max and sum:
//          lets the compiler split each sum into vector lanes (another summation order, within
//          the tolerance). 0: a float reduction stays one serial chain.
//   EXP    the exponential: std::exp (a libm call per score, S^2/2 per head: the softmax loop
//          cannot vectorize) or exp_poly (range reduction and a polynomial, branch-free,
//          inlined: vectorizes).
// Fast: KT 1, BQ 4, SIMD 1, EXP exp_poly. The default is the starter's loops.
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

// Scores of BQ query rows against n <= 64 keys: out[r * S + j] = scale * sum_d q[r][d] kT[d * S + j].
static inline void score_tile(const float* const* q, const float* kT, float* out, int64_t n,
                              int64_t S, int64_t D, float scale) {
    float acc[BQ][64];
    for (int r = 0; r < BQ; ++r)
        for (int64_t j = 0; j < n; ++j) acc[r][j] = 0.0f;
    for (int64_t d = 0; d < D; ++d)
        for (int r = 0; r < BQ; ++r) {
            const float qd = q[r][d];
            for (int64_t j = 0; j < n; ++j) acc[r][j] += qd * kT[d * S + j];
        }
    for (int r = 0; r < BQ; ++r)
        for (int64_t j = 0; j < n; ++j) out[r * S + j] = acc[r][j] * scale;
}

// o[r * D + d] = sum_{j < keys} p[r * S + j] v[j * D + d] for `rows` rows and n <= 64 columns d,
// in registers; p is 0 for the keys a row may not see.
static inline void pv_tile(const float* p, const float* v, float* o, int64_t rows, int64_t keys,
                           int64_t n, int64_t S, int64_t D) {
    float acc[BQ][64];
    for (int r = 0; r < BQ; ++r)
        for (int64_t d = 0; d < n; ++d) acc[r][d] = 0.0f;
    for (int64_t j = 0; j < keys; ++j)
        for (int r = 0; r < BQ; ++r) {
            const float pj = r < rows ? p[r * S + j] : 0.0f;
            for (int64_t d = 0; d < n; ++d) acc[r][d] += pj * v[j * D + d];
        }
    for (int r = 0; r < rows; ++r)
        for (int64_t d = 0; d < n; ++d) o[r * D + d] = acc[r][d];
}

extern "C" void kernel(const float* q, const float* k, const float* v, float* o,
                       int64_t BH, int64_t S, int64_t D) {
    const float scale = 1.0f / std::sqrt((float)D);
    std::vector<float> kT(KT ? D * S : 0);
    std::vector<float> score(BQ * S);  // score[r * S + j], then the probabilities
    for (int64_t b = 0; b < BH; ++b) {
        const float* qb = q + b * S * D;
        const float* kb = k + b * S * D;
        const float* vb = v + b * S * D;
        float* ob = o + b * S * D;
#if KT
        for (int64_t j = 0; j < S; ++j)
            for (int64_t d = 0; d < D; ++d) kT[d * S + j] = kb[j * D + d];
#endif
        for (int64_t i0 = 0; i0 < S; i0 += BQ) {
            const int64_t rows = std::min<int64_t>(BQ, S - i0);
            const int64_t keys = i0 + rows;  // keys 0 .. keys - 1 are visible to some row
            // Query rows past S (when BQ does not divide S) repeat the last row, not stored.
            const float* qr[BQ];
            for (int r = 0; r < BQ; ++r) qr[r] = qb + std::min<int64_t>(i0 + r, S - 1) * D;

            // Scores.
#if KT
            // Register tiles of BQ rows x 64 keys: for each d, broadcast q[r, d] and add
            // q[r, d] * kT[d, j-chunk] (the GEMM "kj" order).
            for (int64_t j0 = 0; j0 < keys; j0 += 64) {
                const int64_t nj = std::min<int64_t>(64, keys - j0);
                if (nj == 64) score_tile(qr, kT.data() + j0, score.data() + j0, 64, S, D, scale);
                else score_tile(qr, kT.data() + j0, score.data() + j0, nj, S, D, scale);
            }
#else
            {
                // Up to four scalar sums (a reduction over an array would stay in order in g++).
                const float* q0 = qr[0];
                const float* q1 = qr[BQ > 1 ? 1 : 0];
                const float* q2 = qr[BQ > 2 ? 2 : 0];
                const float* q3 = qr[BQ > 3 ? 3 : 0];
                for (int64_t j = 0; j < keys; ++j) {
                    const float* kj = kb + j * D;
                    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
                    KG_SIMD_REDUCE(+, s0, s1, s2, s3)
                    for (int64_t d = 0; d < D; ++d) {
                        s0 += q0[d] * kj[d];
                        if (BQ > 1) s1 += q1[d] * kj[d];
                        if (BQ > 2) s2 += q2[d] * kj[d];
                        if (BQ > 3) s3 += q3[d] * kj[d];
                    }
                    score[j] = s0 * scale;
                    if (BQ > 1) score[(BQ > 1 ? 1 : 0) * S + j] = s1 * scale;
                    if (BQ > 2) score[(BQ > 2 ? 2 : 0) * S + j] = s2 * scale;
                    if (BQ > 3) score[(BQ > 3 ? 3 : 0) * S + j] = s3 * scale;
                }
            }
#endif

            // Softmax of each row over its visible keys j <= i; later keys get probability 0.
            float inv[BQ];
            for (int r = 0; r < BQ; ++r) {
                float* sr = score.data() + r * S;
                const int64_t n = std::min<int64_t>(i0 + r, S - 1) + 1;
                float m = sr[0];
                KG_SIMD_REDUCE(max, m)
                for (int64_t j = 0; j < n; ++j) m = sr[j] > m ? sr[j] : m;
                float sum = 0.0f;
                KG_SIMD_REDUCE(+, sum)
                for (int64_t j = 0; j < n; ++j) {
                    const float e = EXP(sr[j] - m);
                    sr[j] = e;
                    sum += e;
                }
                for (int64_t j = n; j < keys; ++j) sr[j] = 0.0f;
                inv[r] = 1.0f / sum;
            }

            // o = p v, then the normalization.
            for (int64_t d0 = 0; d0 < D; d0 += 64) {
                const int64_t nd = std::min<int64_t>(64, D - d0);
                if (nd == 64) pv_tile(score.data(), vb + d0, ob + i0 * D + d0, rows, keys, 64, S, D);
                else pv_tile(score.data(), vb + d0, ob + i0 * D + d0, rows, keys, nd, S, D);
            }
            for (int r = 0; r < rows; ++r)
                for (int64_t d = 0; d < D; ++d) ob[(i0 + r) * D + d] *= inv[r];
        }
    }
}
