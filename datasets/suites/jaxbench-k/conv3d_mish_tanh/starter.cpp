#include <cmath>
#include <cstdint>

// Naive direct 3-D convolution (3x3x3, stride 1, no padding, NCDHW) + Mish + Tanh: one output
// at a time, a float sum over Cin * 27 taps, then y = tanh(v * tanh(log1p(exp(v)))).
extern "C" void kernel(const float* x, const float* weight, const float* bias, float* y,
                       int64_t N, int64_t Cin, int64_t D, int64_t H, int64_t W, int64_t Cout) {
    const int64_t OD = D - 2, OH = H - 2, OW = W - 2;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t co = 0; co < Cout; ++co)
            for (int64_t od = 0; od < OD; ++od)
                for (int64_t oh = 0; oh < OH; ++oh)
                    for (int64_t ow = 0; ow < OW; ++ow) {
                        float acc = bias[co];
                        for (int64_t ci = 0; ci < Cin; ++ci)
                            for (int64_t kd = 0; kd < 3; ++kd)
                                for (int64_t kh = 0; kh < 3; ++kh)
                                    for (int64_t kw = 0; kw < 3; ++kw)
                                        acc += x[(((n * Cin + ci) * D + od + kd) * H + oh + kh) * W + ow + kw] *
                                               weight[(((co * Cin + ci) * 3 + kd) * 3 + kh) * 3 + kw];
                        const float sp = acc > 20.0f ? acc : std::log1p(std::exp(acc));
                        const float m = acc * std::tanh(sp);
                        y[(((n * Cout + co) * OD + od) * OH + oh) * OW + ow] = std::tanh(m);
                    }
}
