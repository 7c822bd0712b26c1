#include <cstdint>

// Naive ragged dot (jax.lax.ragged_dot). lhs: [M, K], rows sorted by group; rhs: [G, K, N];
// group_sizes: [G], summing to M (a group may be empty); out: [M, N]. Group g owns rows
// [start_g, start_g + group_sizes[g]), start_g = sum of the earlier sizes, and
// out[m, n] = sum_k lhs[m, k] * rhs[g, k, n] for its rows. Per row: clear the output row, then
// for each k add lhs[m, k] times row k of rhs[g] (each sum in k order, one row at a time).
extern "C" void kernel(const float* lhs, const float* rhs, const int32_t* group_sizes, float* out,
                       int64_t M, int64_t K, int64_t N, int64_t G) {
    (void)M;
    int64_t start = 0;
    for (int64_t g = 0; g < G; ++g) {
        const int64_t end = start + group_sizes[g];
        const float* w = rhs + g * K * N;
        for (int64_t m = start; m < end; ++m) {
            const float* a = lhs + m * K;
            float* o = out + m * N;
            for (int64_t n = 0; n < N; ++n) o[n] = 0.0f;
            for (int64_t k = 0; k < K; ++k) {
                const float ak = a[k];
                for (int64_t n = 0; n < N; ++n) o[n] += ak * w[k * N + n];
            }
        }
        start = end;
    }
}
