#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

// Naive direct 3x3 convolution (stride 1, no padding, NCHW) + conv bias into a buffer; then
// GroupNorm (16 groups of Cout/16 consecutive channels, statistics over the group's channels
// and OH x OW, eps 1e-5, affine gn_weight, gn_bias), tanh, hardswish
// h(t) = t * min(max(t + 3, 0), 6) / 6, residual add to the conv output, and logsumexp over
// the channels: y[n, 0, oh, ow] = log(sum_c exp(conv + h(tanh(gn(conv))))). One image at a time;
// the window sums and the group statistics use double accumulators, the rest is float.
extern "C" void kernel(const float* x, const float* weight, const float* conv_bias,
                       const float* gn_weight, const float* gn_bias, float* y, int64_t N,
                       int64_t Cin, int64_t H, int64_t W, int64_t Cout, int64_t OH, int64_t OW) {
    const int64_t G = 16;
    const int64_t CG = Cout / G;
    const int64_t P = OH * OW;
    std::vector<float> conv(Cout * P);
    std::vector<float> res(Cout * P);
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t co = 0; co < Cout; ++co)
            for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    double acc = conv_bias[co];
                    for (int64_t ci = 0; ci < Cin; ++ci)
                        for (int64_t kh = 0; kh < 3; ++kh)
                            for (int64_t kw = 0; kw < 3; ++kw)
                                acc += (double)x[((n * Cin + ci) * H + oh + kh) * W + ow + kw] *
                                       weight[((co * Cin + ci) * 3 + kh) * 3 + kw];
                    conv[co * P + oh * OW + ow] = (float)acc;
                }
        for (int64_t g = 0; g < G; ++g) {
            const float* v = conv.data() + g * CG * P;
            const int64_t count = CG * P;
            double mean = 0.0;
            for (int64_t i = 0; i < count; ++i) mean += v[i];
            mean /= (double)count;
            double var = 0.0;
            for (int64_t i = 0; i < count; ++i) {
                double d = v[i] - mean;
                var += d * d;
            }
            var /= (double)count;
            const float m = (float)mean;
            const float rstd = (float)(1.0 / std::sqrt(var + 1e-5));
            for (int64_t c = g * CG; c < (g + 1) * CG; ++c)
                for (int64_t p = 0; p < P; ++p) {
                    float xc = conv[c * P + p];
                    float t = std::tanh((xc - m) * rstd * gn_weight[c] + gn_bias[c]);
                    float r6 = std::min(std::max(t + 3.0f, 0.0f), 6.0f);
                    res[c * P + p] = xc + t * r6 / 6.0f;
                }
        }
        for (int64_t p = 0; p < P; ++p) {
            float mx = -INFINITY;
            for (int64_t c = 0; c < Cout; ++c) mx = std::max(mx, res[c * P + p]);
            float s = 0.0f;
            for (int64_t c = 0; c < Cout; ++c) s += std::exp(res[c * P + p] - mx);
            y[n * P + p] = mx + std::log(s);
        }
    }
}
