#include <cmath>
#include <cstdint>

// Naive direct 3x3 convolution (stride 1, no padding, NCHW) + conv bias, then
// v * tanh(softplus(v)) written into y; then training-mode BatchNorm in place: per channel,
// mean and biased variance over N, OH, OW (eps 1e-5), affine bn_weight, bn_bias. The window
// sums and the channel statistics use double accumulators; the activations are float.
extern "C" void kernel(const float* x, const float* weight, const float* conv_bias,
                       const float* bn_weight, const float* bn_bias, float* y, int64_t N,
                       int64_t Cin, int64_t H, int64_t W, int64_t Cout, int64_t OH, int64_t OW) {
    const int64_t P = OH * OW;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t co = 0; co < Cout; ++co)
            for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    double acc = conv_bias[co];
                    for (int64_t ci = 0; ci < Cin; ++ci)
                        for (int64_t kh = 0; kh < 3; ++kh)
                            for (int64_t kw = 0; kw < 3; ++kw)
                                acc += (double)x[((n * Cin + ci) * H + oh + kh) * W + ow + kw] *
                                       weight[((co * Cin + ci) * 3 + kh) * 3 + kw];
                    float v = (float)acc;
                    float sp = std::log1p(std::exp(v));
                    y[(n * Cout + co) * P + oh * OW + ow] = std::tanh(sp) * v;
                }
    const double count = (double)(N * P);
    for (int64_t co = 0; co < Cout; ++co) {
        double mean = 0.0;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t p = 0; p < P; ++p) mean += y[(n * Cout + co) * P + p];
        mean /= count;
        double var = 0.0;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t p = 0; p < P; ++p) {
                double d = y[(n * Cout + co) * P + p] - mean;
                var += d * d;
            }
        var /= count;
        float rstd = (float)(1.0 / std::sqrt(var + 1e-5));
        for (int64_t n = 0; n < N; ++n)
            for (int64_t p = 0; p < P; ++p) {
                float& v = y[(n * Cout + co) * P + p];
                v = (v - (float)mean) * rstd * bn_weight[co] + bn_bias[co];
            }
    }
}
