#include <cstdint>

// Naive direct 3x3 convolution, stride 1, zero padding 1, NCHW.
// One output at a time; every tap checks the image bounds.
extern "C" void kernel(const float* x, const float* w, const float* bias, float* y,
                       int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Cout) {
    for (int64_t n = 0; n < N; ++n)
        for (int64_t co = 0; co < Cout; ++co)
            for (int64_t oh = 0; oh < H; ++oh)
                for (int64_t ow = 0; ow < W; ++ow) {
                    float acc = bias[co];
                    for (int64_t ci = 0; ci < Cin; ++ci)
                        for (int64_t kh = 0; kh < 3; ++kh)
                            for (int64_t kw = 0; kw < 3; ++kw) {
                                int64_t ih = oh + kh - 1;
                                int64_t iw = ow + kw - 1;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += x[((n * Cin + ci) * H + ih) * W + iw] *
                                       w[((co * Cin + ci) * 3 + kh) * 3 + kw];
                            }
                    y[((n * Cout + co) * H + oh) * W + ow] = acc;
                }
}
