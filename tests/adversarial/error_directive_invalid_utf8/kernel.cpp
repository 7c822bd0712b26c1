// Attack: an #error line whose text is not UTF-8: ff fe (never valid), c0 80 (an overlong NUL),
// ed a0 80 (a lone UTF-16 surrogate), e2 82 (cut short), f8 88 80 80 80 (a 5-byte form). g++
// copies the bytes into its JSON diagnostics as they are.
// Why it must not be rewarded (or crash anything): the source does not compile. The verdict is a
// compile error whose diagnostic stays readable (the bad bytes become U+FFFD), and the compile
// cache, `kernelgym eval --json` (nlohmann's dump() throws on invalid UTF-8: the CLI aborted), the
// wire and the text report all survive it.
#include <cstdint>

#error kernel says ÿþ | À€ | í € | â‚ | øˆ€€€ | end

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {}
