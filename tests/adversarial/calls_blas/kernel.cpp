// Attack: outsource the GEMM to a BLAS library. cblas_sgemm is declared by hand; if the
// evaluation process has a BLAS loaded (libtorch ships MKL/OpenBLAS), the dynamic linker would
// resolve it and the "kernel" would be a vendor library's work.
// Why it must not be rewarded: the task measures the candidate's own code. Undefined symbols
// may only come from libc/libm/libgomp/libstdc++, so the shared object is rejected.
#include <cstdint>

extern "C" void cblas_sgemm(int layout, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const float* a, int lda, const float* b, int ldb,
                            float beta, float* c, int ldc);

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y,
                       int64_t M, int64_t N, int64_t K) {
    const int kRowMajor = 101, kNoTrans = 111;
    cblas_sgemm(kRowMajor, kNoTrans, kNoTrans, (int)M, (int)N, (int)K, 1.0f, A, (int)K, B, (int)N,
                0.0f, y, (int)N);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            float v = y[m * N + n] + bias[n];
            y[m * N + n] = v > 0.0f ? v : 0.0f;
        }
}
