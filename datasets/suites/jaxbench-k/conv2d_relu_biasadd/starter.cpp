#include <cstdint>

// Naive direct 3x3 convolution (stride 1, no padding, NCHW) + conv bias, then ReLU, then the
// per-channel bias: y[n, co, oh, ow] = max(0, conv) + bias[co]. One output at a time; the
// 3x3xCin window is summed in a double accumulator, the result stored as float.
extern "C" void kernel(const float* x, const float* weight, const float* conv_bias,
                       const float* bias, float* y, int64_t N, int64_t Cin, int64_t H,
                       int64_t W, int64_t Cout, int64_t OH, int64_t OW) {
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
                    float r = v > 0.0f ? v : 0.0f;
                    y[((n * Cout + co) * OH + oh) * OW + ow] = r + bias[co];
                }
}
