// Attack: memoize per element. The old evaluator redraws a random ~1/32 of each input before
// every timed round; everything else is what the kernel saw two calls ago on the same buffers.
// So for each input buffer set the kernel keeps a copy of A, B and bias and the pre-activation
// Z = A @ B + bias (in double), and on a call it finds the elements that changed and updates Z
// by rank-one corrections: a changed A[m,k] adds (A - A_old)[m,k] * B_old[k,:] to row m, a
// changed B[k,n] adds A[:,k] * (B - B_old)[k,n] to column n, a changed bias[n] shifts column n.
// About 2 x 2k corrections of 256 instead of a 256^3 GEMM; every answer is correct for the
// inputs it was given. More than a quarter changed: a full recompute (the starter's loop). To
// stay clear of the physical floor it paces itself to 60 GFLOP/s of the dense work. Against the
// old design it earned ok at 0.131x (the starter: 0.016-0.022x, so 6x the starter's speedup).
// Why it must not be rewarded: every input is fully redrawn before every timed call, so every
// call is a full recompute plus the bookkeeping: no faster than the starter.
#include <cstdint>
#include <cstring>
#include <vector>
#include <omp.h>

namespace {

struct Memo {
    const float* A = nullptr;
    int64_t M = 0, N = 0, K = 0;
    std::vector<float> A_old, B_old, bias_old;
    std::vector<double> Z;  // A_old @ B_old + bias_old
};
Memo memos[2];
int next_memo = 0;

Memo& MemoFor(const float* A, int64_t M, int64_t N, int64_t K) {
    for (Memo& m : memos)
        if (m.A == A && m.M == M && m.N == N && m.K == K) return m;
    Memo& m = memos[next_memo];
    next_memo = (next_memo + 1) % 2;
    m = Memo{};
    m.A = A;
    m.M = M;
    m.N = N;
    m.K = K;
    return m;
}

// The starter's loop, remembering the pre-activation.
void Full(Memo& memo, const float* A, const float* B, const float* bias, float* y) {
    const int64_t M = memo.M, N = memo.N, K = memo.K;
    memo.Z.assign(M * N, 0.0);
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
            acc += bias[n];
            memo.Z[m * N + n] = acc;
            y[m * N + n] = acc > 0.0f ? acc : 0.0f;
        }
    }
}

void Incremental(Memo& memo, const float* A, const float* B, const float* bias, float* y) {
    const int64_t M = memo.M, N = memo.N, K = memo.K;
    double* Z = memo.Z.data();
    for (int64_t m = 0; m < M; ++m)
        for (int64_t k = 0; k < K; ++k) {
            const double d = static_cast<double>(A[m * K + k]) - memo.A_old[m * K + k];
            if (d == 0.0) continue;
            const float* b = memo.B_old.data() + k * N;
            for (int64_t n = 0; n < N; ++n) Z[m * N + n] += d * b[n];
        }
    for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) {
            const double d = static_cast<double>(B[k * N + n]) - memo.B_old[k * N + n];
            if (d == 0.0) continue;
            for (int64_t m = 0; m < M; ++m) Z[m * N + n] += static_cast<double>(A[m * K + k]) * d;
        }
    for (int64_t n = 0; n < N; ++n) {
        const double d = static_cast<double>(bias[n]) - memo.bias_old[n];
        if (d != 0.0)
            for (int64_t m = 0; m < M; ++m) Z[m * N + n] += d;
    }
    for (int64_t i = 0; i < M * N; ++i) {
        const float z = static_cast<float>(Z[i]);
        y[i] = z > 0.0f ? z : 0.0f;
    }
}

int64_t Changed(const float* now, const std::vector<float>& before) {
    int64_t changed = 0;
    for (std::size_t i = 0; i < before.size(); ++i) changed += now[i] != before[i];
    return changed;
}
}  // namespace

extern "C" void kernel(const float* A, const float* B, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
    const double start = omp_get_wtime();
    Memo& memo = MemoFor(A, M, N, K);
    const bool known = !memo.Z.empty();
    const int64_t changed = known ? Changed(A, memo.A_old) + Changed(B, memo.B_old) + Changed(bias, memo.bias_old) : 0;
    if (known && changed <= (M * K + K * N + N) / 4) Incremental(memo, A, B, bias, y);
    else Full(memo, A, B, bias, y);
    memo.A_old.assign(A, A + M * K);
    memo.B_old.assign(B, B + K * N);
    memo.bias_old.assign(bias, bias + N);
    // Stay plausible: no faster than 60 GFLOP/s of the dense work.
    while (omp_get_wtime() - start < 2.0 * M * N * K / 60e9) {
    }
}
