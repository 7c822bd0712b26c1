#include <cstdint>

// Naive grouped matmul (MegaBlox gmm, transposed rhs). lhs: [M, K], rows sorted by group;
// rhs: [G, N, K]; group_sizes: [G], summing to M (a group may be empty); out: [M, N].
// Group g owns rows [start_g, start_g + group_sizes[g]), start_g = sum of the earlier sizes,
// and out[m, n] = lhs[m, :] . rhs[g, n, :] for its rows: one dot product per output.
extern "C" void kernel(const float* lhs, const float* rhs, const int32_t* group_sizes, float* out,
                       int64_t M, int64_t K, int64_t N, int64_t G) {
    (void)M;
    int64_t start = 0;
    for (int64_t g = 0; g < G; ++g) {
        const int64_t end = start + group_sizes[g];
        const float* w = rhs + g * N * K;
        for (int64_t m = start; m < end; ++m) {
            const float* a = lhs + m * K;
            for (int64_t n = 0; n < N; ++n) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; ++k) acc += a[k] * w[n * K + k];
                out[m * N + n] = acc;
            }
        }
        start = end;
    }
}
