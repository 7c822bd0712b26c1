#include <cmath>
#include <cstdint>
#include <vector>

// Naive Conv3d (3x3x3, stride 1, no padding, NCDHW, with bias) + GroupNorm (8 groups of
// Cout / 8 consecutive channels, biased variance, eps 1e-5, affine) + mean over all of
// (C, D', H', W') per batch element, in the literal order: the whole convolution output of one
// batch element is computed (float sums over Cin * 27 taps), then each group's mean and
// variance, then the normalized, affine-transformed values are averaged. The reductions over
// the many output values accumulate in double (a sequential float sum of ~10^5 terms would
// lose more precision than the reference's pairwise sums).
extern "C" void kernel(const float* x, const float* weight, const float* bias,
                       const float* gn_weight, const float* gn_bias, float* out, int64_t N,
                       int64_t Cin, int64_t D, int64_t H, int64_t W, int64_t Cout) {
    const int64_t G = 8;
    const int64_t CG = Cout / G;
    const int64_t OD = D - 2, OH = H - 2, OW = W - 2;
    const int64_t S = OD * OH * OW;
    std::vector<float> y(Cout * S);
    for (int64_t n = 0; n < N; ++n) {
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
                        y[co * S + (od * OH + oh) * OW + ow] = acc;
                    }
        double total = 0.0;
        for (int64_t g = 0; g < G; ++g) {
            const float* yg = y.data() + g * CG * S;
            double sum = 0.0;
            for (int64_t i = 0; i < CG * S; ++i) sum += yg[i];
            const float mean = (float)(sum / (double)(CG * S));
            double sq = 0.0;
            for (int64_t i = 0; i < CG * S; ++i) {
                const float d = yg[i] - mean;
                sq += (double)(d * d);
            }
            const float var = (float)(sq / (double)(CG * S));
            const float rstd = 1.0f / std::sqrt(var + 1e-5f);
            for (int64_t c = 0; c < CG; ++c) {
                const int64_t co = g * CG + c;
                for (int64_t s = 0; s < S; ++s)
                    total += (double)((yg[c * S + s] - mean) * rstd * gn_weight[co] + gn_bias[co]);
            }
        }
        out[n] = (float)(total / (double)(Cout * S));
    }
}
