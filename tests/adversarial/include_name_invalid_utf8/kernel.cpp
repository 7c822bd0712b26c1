// Attack: include a header whose name is not UTF-8 and carries terminal control bytes: ff fe,
// the overlong c0 80, the lone surrogate ed a0 80, ESC [2K (erase the line) and a carriage return
// before a fake verdict. The static check quotes the name it refuses in its message.
// Why it must not be rewarded (or crash anything): the include is refused before anything is
// compiled; the quoted name reaches JSON, msgpack and the text report as valid UTF-8, its
// control bytes shown as escapes.
#include <cstdint>
#include <ÿþÀ€í €[2Kstatus: ok>

extern "C" void kernel(const float* a, const float* b, float* y, int64_t N) {}
