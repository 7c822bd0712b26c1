#include <cstdint>

// Naive GEMM, C[M, N] = A[M, K] . B[K, N], all row-major: for each row i of C, zero it, then for
// k = 0..K-1 add A[i, k] * B[k, :] (each C[i, j] accumulates its K products in order, in float).
extern "C" void kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
    for (int64_t i = 0; i < M; ++i) {
        float* c = C + i * N;
        for (int64_t j = 0; j < N; ++j) c[j] = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
            const float a = A[i * K + k];
            const float* b = B + k * N;
            for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
        }
    }
}
