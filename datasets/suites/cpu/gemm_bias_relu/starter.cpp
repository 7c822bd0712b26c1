#include <cstdint>

// Naive GEMM + bias + ReLU: textbook i-j-k triple loop, one dot product per output.
extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += A[m * K + k] * B[k * N + n];
            acc += bias[n];
            y[m * N + n] = acc > 0.0f ? acc : 0.0f;
        }
    }
}
