// Linear (weight[N, K], nn.Linear layout) + exact GELU + row softmax:
// y[m, :] = softmax(gelu(x[m] . weight[n] + bias[n])), with five knobs (task.json `knobs`; the
// `knobs` action prepends their #defines). The kernel walks blocks of NB output columns (= NB
// rows of weight); inside a block, groups of MR rows of x; each group accumulates an MR x NB
// tile in a local array, then adds the bias and applies GELU while the tile is hot. A last pass
// softmaxes each row of y (max, exp and sum, scale).
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
//   SIMD   1: `omp simd reduction` on the jk dot product and on the softmax's max and sum: lets
//          the compiler split each sum into vector lanes (another summation order, within the
//          tolerance). Without it a float reduction stays a serial chain.
//   POLY   0: std::erf and std::exp (libm calls, one element at a time; the epilogue and the
//          softmax loops cannot vectorize). 1: gelu_poly and exp_poly below (polynomials,
//          branch-free, they vectorize). The epilogue is ~M*N erf + exp: once the GEMM is fast,
//          libm is a large share of the time.
// Fast: ORDER 0, MR 4, NB 64, SIMD 1, POLY 1. The default is the starter's loops.
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
// gelu(z) = z/2 (1 + erf(z / sqrt 2)) without libm. t = |z| / sqrt 2. For t < 1,
// erf(t) = t P(t^2) (P: degree 6, relative error ~1e-9); for t >= 1, erfc(t) = exp(-t^2) R(w)
// with w = 1 / (1 + t/2) - 1/2 (R: degree 8, relative error ~3e-9 on t in [1, 6]; t is clamped
// at 6, where erfc(t) ~ 2e-17). 1 + erf(+-t) is formed as 1 +- erf(t) or as 2 - erfc / erfc, never by
// cancelling two numbers near 1, so gelu stays accurate for negative z.
static inline float gelu_poly(float z) {
    const float t = std::fabs(z) * 0.70710678f;
    const float s = t * t;
    float p = 7.88249711e-5f;
    p = p * s - 8.01885499e-4f;
    p = p * s + 5.18931194e-3f;
    p = p * s - 2.68543288e-2f;
    p = p * s + 1.12835975e-1f;
    p = p * s - 3.76126269e-1f;
    p = p * s + 1.12837917e+0f;
    const float erf_small = t * p;
    const float tc = t < 6.0f ? t : 6.0f;
    const float w = 1.0f / (1.0f + 0.5f * tc) - 0.5f;
    float q = 4.53795511e-2f;
    q = q * w + 1.22597206e-1f;
    q = q * w - 5.61976442e-2f;
    q = q * w - 2.23917839e-1f;
    q = q * w + 5.97639432e-2f;
    q = q * w + 6.31829238e-1f;
    q = q * w + 9.66632539e-1f;
    q = q * w + 8.54371692e-1f;
    q = q * w + 2.55395677e-1f;
    const float erfc_large = exp_poly(-tc * tc) * q;
    // 1 + erf(z / sqrt 2) for z >= 0 and 1 - erf(|z| / sqrt 2) for z < 0
    const float f = t < 1.0f ? (z >= 0.0f ? 1.0f + erf_small : 1.0f - erf_small)
                             : (z >= 0.0f ? 2.0f - erfc_large : erfc_large);
    return 0.5f * z * f;
}
// mish(v) = v tanh(log(1 + e^v)). With u = e^v, tanh(log(1 + u)) = ((1+u)^2 - 1) / ((1+u)^2 + 1)
// = n / (n + 2), n = u (u + 2): one exp and one division. v is clamped at 20 inside the exp (where
// n / (n + 2) is 1 to float precision) so that n cannot overflow.
static inline float mish_poly(float v) {
    const float u = exp_poly(v < 20.0f ? v : 20.0f);
    const float n = u * (u + 2.0f);
    return v * (n / (n + 2.0f));
}

#if POLY
#define GELU(v) gelu_poly(v)
#define EXP(v) exp_poly(v)
#else
#define GELU(v) (0.5f * (v) * (1.0f + std::erf((v) * 0.70710678118654752f)))
#define EXP(v) std::exp(v)
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
                    yr[j] = GELU(v);
                }
            }
        }
    }
    for (int64_t m = 0; m < M; ++m) {
        float* row = y + m * N;
        float mx = row[0];
        KG_SIMD_REDUCE(max, mx)
        for (int64_t n = 0; n < N; ++n) mx = row[n] > mx ? row[n] : mx;
        float sum = 0.0f;
        KG_SIMD_REDUCE(+, sum)
        for (int64_t n = 0; n < N; ++n) {
            const float e = EXP(row[n] - mx);
            row[n] = e;
            sum += e;
        }
        const float inv = 1.0f / sum;
        for (int64_t n = 0; n < N; ++n) row[n] *= inv;
    }
}
