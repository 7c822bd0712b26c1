#include <cmath>
#include <cstdint>

// Naive RMSNorm, one row at a time: scalar sum of squares, then scale each element by
// 1 / sqrt(mean + eps) and by the weight. x[T, D], w[D], y[T, D], row-major. The sum of squares
// is accumulated in double: a sequential float sum of D = 8192 terms is off by ~2e-6 (relative),
// more than the task's tolerance.
extern "C" void kernel(const float* x, const float* w, float* y, int64_t T, int64_t D) {
    for (int64_t t = 0; t < T; ++t) {
        const float* xr = x + t * D;
        float* yr = y + t * D;
        double ss = 0.0;
        for (int64_t d = 0; d < D; ++d)
            ss += (double)(xr[d] * xr[d]);
        const float inv = 1.0f / std::sqrt((float)(ss / (double)D) + 1e-5f);
        for (int64_t d = 0; d < D; ++d)
            yr[d] = xr[d] * inv * w[d];
    }
}
