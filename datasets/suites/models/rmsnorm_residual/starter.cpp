#include <cmath>
#include <cstdint>

// Naive fused residual add + RMSNorm (Llama, eps 1e-5), one row at a time:
// h = x + residual (the new residual stream), then a scalar sum of squares of h,
// then y = h / sqrt(mean(h^2) + eps) * w. The sum of squares is accumulated in double: a
// sequential float sum of 4096 squares drifts by ~2e-6 relative, the size of the tolerance.
extern "C" void kernel(const float* x, const float* residual, const float* w, float* h, float* y,
                       int64_t T, int64_t D) {
    for (int64_t t = 0; t < T; ++t) {
        const float* xr = x + t * D;
        const float* rr = residual + t * D;
        float* hr = h + t * D;
        float* yr = y + t * D;
        double ss = 0.0;
        for (int64_t d = 0; d < D; ++d) {
            float v = xr[d] + rr[d];
            hr[d] = v;
            ss += (double)v * v;
        }
        float inv = (float)(1.0 / std::sqrt(ss / (double)D + 1e-5));
        for (int64_t d = 0; d < D; ++d)
            yr[d] = hr[d] * inv * w[d];
    }
}
