// Where the runner's helper programs and caches live, for binaries in this build.
#pragma once

#include "tpu_runner/backend.h"

namespace kernelgym {

// tools_dir: $KERNELGYM_TOOLS_DIR, else the build's tpu_runner/ folder (compiled in).
// cache_dir: DefaultCacheDir().
BackendConfig DefaultBackendConfig();

}  // namespace kernelgym
