#include <cmath>
#include <cstdint>
#include <vector>

// Naive ConvTranspose3d (kernel 4, stride 2, padding 1, no bias, NCDHW, weight[Cin, Cout, 4,
// 4, 4]) + LayerNorm over the last dim (2W == Cout values, biased variance, eps 1e-5, affine)
// + exact GELU + scaling by 1.0. Each output is gathered from every tap whose input index
// (o + 1 - k) / 2 is whole and in range; then each row of 2W values is normalized.
extern "C" void kernel(const float* x, const float* weight, const float* ln_weight,
                       const float* ln_bias, float* y, int64_t N, int64_t Cin, int64_t D,
                       int64_t H, int64_t W, int64_t Cout) {
    const int64_t OD = 2 * D, OH = 2 * H, OW = 2 * W;
    std::vector<float> row(OW);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t co = 0; co < Cout; ++co)
            for (int64_t od = 0; od < OD; ++od)
                for (int64_t oh = 0; oh < OH; ++oh) {
                    for (int64_t ow = 0; ow < OW; ++ow) {
                        float acc = 0.0f;
                        for (int64_t ci = 0; ci < Cin; ++ci)
                            for (int64_t kd = 0; kd < 4; ++kd) {
                                const int64_t td = od + 1 - kd;
                                if (td < 0 || td % 2 != 0 || td / 2 >= D) continue;
                                for (int64_t kh = 0; kh < 4; ++kh) {
                                    const int64_t th = oh + 1 - kh;
                                    if (th < 0 || th % 2 != 0 || th / 2 >= H) continue;
                                    for (int64_t kw = 0; kw < 4; ++kw) {
                                        const int64_t tw = ow + 1 - kw;
                                        if (tw < 0 || tw % 2 != 0 || tw / 2 >= W) continue;
                                        acc += x[(((n * Cin + ci) * D + td / 2) * H + th / 2) * W + tw / 2] *
                                               weight[(((ci * Cout + co) * 4 + kd) * 4 + kh) * 4 + kw];
                                    }
                                }
                            }
                        row[ow] = acc;
                    }
                    float mean = 0.0f;
                    for (int64_t i = 0; i < OW; ++i) mean += row[i];
                    mean /= (float)OW;
                    float var = 0.0f;
                    for (int64_t i = 0; i < OW; ++i) {
                        const float d = row[i] - mean;
                        var += d * d;
                    }
                    var /= (float)OW;
                    const float rstd = 1.0f / std::sqrt(var + 1e-5f);
                    float* out = y + (((n * Cout + co) * OD + od) * OH + oh) * OW;
                    for (int64_t i = 0; i < OW; ++i) {
                        const float v = (row[i] - mean) * rstd * ln_weight[i] + ln_bias[i];
                        const float g = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
                        out[i] = g * 1.0f;
                    }
                }
}
