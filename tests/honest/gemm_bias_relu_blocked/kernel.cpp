#include <algorithm>
#include <cstdint>
#include <immintrin.h>

// GEMM + bias + ReLU with an AVX2/FMA register-blocked micro-kernel:
// a 6x16 tile of C lives in 12 ymm registers while k runs over a K block;
// B is walked one 16-column panel at a time so the panel stays in L1.
// K is blocked (KC) for large K; the first K block starts from the bias and
// the last one applies the ReLU. Row/column edges use a scalar path.

namespace {

constexpr int64_t MR = 6;
constexpr int64_t NR = 16;
constexpr int64_t KC = 256;

#if defined(__AVX2__) && defined(__FMA__)
template <int R>
inline void micro(const float* A, const float* B, const float* bias, float* y,
                  int64_t N, int64_t K, int64_t k0, int64_t k1, bool first, bool last) {
    __m256 c0[R], c1[R];
    if (first) {
        __m256 b0 = _mm256_loadu_ps(bias), b1 = _mm256_loadu_ps(bias + 8);
        for (int r = 0; r < R; ++r) { c0[r] = b0; c1[r] = b1; }
    } else {
        for (int r = 0; r < R; ++r) {
            c0[r] = _mm256_loadu_ps(y + r * N);
            c1[r] = _mm256_loadu_ps(y + r * N + 8);
        }
    }
    for (int64_t k = k0; k < k1; ++k) {
        __m256 b0 = _mm256_loadu_ps(B + k * N);
        __m256 b1 = _mm256_loadu_ps(B + k * N + 8);
        for (int r = 0; r < R; ++r) {
            __m256 a = _mm256_broadcast_ss(A + r * K + k);
            c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
        }
    }
    if (last) {
        __m256 z = _mm256_setzero_ps();
        for (int r = 0; r < R; ++r) { c0[r] = _mm256_max_ps(c0[r], z); c1[r] = _mm256_max_ps(c1[r], z); }
    }
    for (int r = 0; r < R; ++r) {
        _mm256_storeu_ps(y + r * N, c0[r]);
        _mm256_storeu_ps(y + r * N + 8, c1[r]);
    }
}
#endif

// scalar path for a rectangle [m0,m1) x [n0,n1), full K
inline void scalar_block(const float* A, const float* B, const float* bias, float* y,
                         int64_t N, int64_t K, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    for (int64_t m = m0; m < m1; ++m) {
        for (int64_t n = n0; n < n1; ++n) y[m * N + n] = bias[n];
        for (int64_t k = 0; k < K; ++k) {
            const float a = A[m * K + k];
            for (int64_t n = n0; n < n1; ++n) y[m * N + n] += a * B[k * N + n];
        }
        for (int64_t n = n0; n < n1; ++n) y[m * N + n] = std::max(y[m * N + n], 0.0f);
    }
}

}  // namespace

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    int64_t nfull = 0;
#if defined(__AVX2__) && defined(__FMA__)
    nfull = (N / NR) * NR;
    if (K == 0) nfull = 0;  // let the scalar path write bias/relu
    for (int64_t k0 = 0; k0 < K && nfull > 0; k0 += KC) {
        const int64_t k1 = std::min(K, k0 + KC);
        const bool first = (k0 == 0), last = (k1 == K);
        for (int64_t n0 = 0; n0 < nfull; n0 += NR) {
            int64_t m0 = 0;
            for (; m0 + MR <= M; m0 += MR)
                micro<6>(A + m0 * K, B + n0, bias + n0, y + m0 * N + n0, N, K, k0, k1, first, last);
            const float* a = A + m0 * K;
            const float* bb = B + n0;
            const float* bi = bias + n0;
            float* yy = y + m0 * N + n0;
            switch (M - m0) {
                case 5: micro<5>(a, bb, bi, yy, N, K, k0, k1, first, last); break;
                case 4: micro<4>(a, bb, bi, yy, N, K, k0, k1, first, last); break;
                case 3: micro<3>(a, bb, bi, yy, N, K, k0, k1, first, last); break;
                case 2: micro<2>(a, bb, bi, yy, N, K, k0, k1, first, last); break;
                case 1: micro<1>(a, bb, bi, yy, N, K, k0, k1, first, last); break;
                default: break;
            }
        }
    }
#endif
    if (nfull < N) scalar_block(A, B, bias, y, N, K, 0, M, nfull, N);
}
