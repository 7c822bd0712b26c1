#include <algorithm>
#include <cstdint>

// Direct 3x3 convolution (stride 1, zero padding 1, NCHW), reorganized so the
// innermost loop runs along an output row (contiguous, #pragma omp simd) and
// four output channels share each input-row load. The padding is handled by
// clipping the ow range per tap instead of testing every tap.
namespace {

template <int CB>
inline void conv_rows(const float* __restrict xn, const float* __restrict w,
                      const float* __restrict bias, float* __restrict yn,
                      int64_t Cin, int64_t H, int64_t W, int64_t co0) {
    for (int64_t oh = 0; oh < H; ++oh) {
        float* yr[CB];
        for (int c = 0; c < CB; ++c) {
            yr[c] = yn + ((co0 + c) * H + oh) * W;
            const float b = bias[co0 + c];
            for (int64_t ow = 0; ow < W; ++ow) yr[c][ow] = b;
        }
        for (int64_t ci = 0; ci < Cin; ++ci) {
            for (int64_t kh = 0; kh < 3; ++kh) {
                const int64_t ih = oh + kh - 1;
                if (ih < 0 || ih >= H) continue;
                const float* xrow = xn + (ci * H + ih) * W;
                for (int64_t kw = 0; kw < 3; ++kw) {
                    const int64_t lo = std::max<int64_t>(0, 1 - kw);
                    const int64_t hi = std::min<int64_t>(W, W + 1 - kw);
                    const float* xs = xrow + (kw - 1);
                    float wv[CB];
                    for (int c = 0; c < CB; ++c) wv[c] = w[(((co0 + c) * Cin + ci) * 3 + kh) * 3 + kw];
                    if constexpr (CB == 4) {
                        float* y0 = yr[0]; float* y1 = yr[1]; float* y2 = yr[2]; float* y3 = yr[3];
                        const float w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3];
#pragma omp simd
                        for (int64_t ow = lo; ow < hi; ++ow) {
                            const float xv = xs[ow];
                            y0[ow] += w0 * xv;
                            y1[ow] += w1 * xv;
                            y2[ow] += w2 * xv;
                            y3[ow] += w3 * xv;
                        }
                    } else {
                        float* y0 = yr[0];
                        const float w0 = wv[0];
#pragma omp simd
                        for (int64_t ow = lo; ow < hi; ++ow) y0[ow] += w0 * xs[ow];
                    }
                }
            }
        }
    }
}

}  // namespace

extern "C" void kernel(const float* x, const float* w, const float* bias, float* y,
                       int64_t N, int64_t Cin, int64_t H, int64_t W, int64_t Cout) {
    for (int64_t n = 0; n < N; ++n) {
        const float* xn = x + n * Cin * H * W;
        float* yn = y + n * Cout * H * W;
        int64_t co = 0;
        for (; co + 4 <= Cout; co += 4) conv_rows<4>(xn, w, bias, yn, Cin, H, W, co);
        for (; co < Cout; ++co) conv_rows<1>(xn, w, bias, yn, Cin, H, W, co);
    }
}
