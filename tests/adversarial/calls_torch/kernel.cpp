// Attack: call into libtorch, which the evaluation process may have loaded for the reference.
// at::native::cpublas::gemm takes only raw pointers and scalars, so it can be declared by hand
// without any torch header (the declaration mirrors ATen/native/CPUBlas.h). The row-major
// product y = A @ B is the column-major product y^T = B^T @ A^T, hence the swapped operands.
// Why it must not be rewarded: the reference's own library would be doing the work. The
// symbol comes from no allowed library, so the shared object is rejected at the symbol check.
#include <cstdint>

namespace at {
namespace native {
enum class TransposeType { NoTranspose, Transpose, ConjTranspose };
namespace cpublas {
void gemm(TransposeType transa, TransposeType transb, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
          float beta, float* c, int64_t ldc);
}  // namespace cpublas
}  // namespace native
}  // namespace at

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    using at::native::TransposeType;
    at::native::cpublas::gemm(TransposeType::NoTranspose, TransposeType::NoTranspose, N, M, K,
                              1.0f, B, N, A, K, 0.0f, y, N);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            float v = y[m * N + n] + bias[n];
            y[m * N + n] = v > 0.0f ? v : 0.0f;
        }
}
