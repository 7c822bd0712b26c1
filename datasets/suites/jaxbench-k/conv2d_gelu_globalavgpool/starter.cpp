#include <cmath>
#include <cstdint>

// Naive direct 3x3 convolution (stride 1, no padding, NCHW) + conv bias, exact GELU
// 0.5 * v * (1 + erf(v / sqrt(2))), and the mean over the (H-2) x (W-2) output plane:
// y[n, co]. One output at a time; the window sums and the plane sum use double accumulators,
// the GELU is evaluated in float.
extern "C" void kernel(const float* x, const float* weight, const float* conv_bias, float* y,
                       int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Cout) {
    const int64_t OH = H - 2, OW = W - 2;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t co = 0; co < Cout; ++co) {
            double sum = 0.0;
            for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    double acc = conv_bias[co];
                    for (int64_t ci = 0; ci < Cin; ++ci)
                        for (int64_t kh = 0; kh < 3; ++kh)
                            for (int64_t kw = 0; kw < 3; ++kw)
                                acc += (double)x[((n * Cin + ci) * H + oh + kh) * W + ow + kw] *
                                       weight[((co * Cin + ci) * 3 + kh) * 3 + kw];
                    float v = (float)acc;
                    sum += 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
                }
            y[n * Cout + co] = (float)(sum / (double)(OH * OW));
        }
}
