#include "tpu_runner/runner_config.h"

#include <cstdlib>

#include "tpu_runner/machine.h"

namespace kernelgym {

BackendConfig DefaultBackendConfig() {
  BackendConfig config;
  const char* tools = std::getenv("KERNELGYM_TOOLS_DIR");
  config.tools_dir = tools ? tools : KERNELGYM_TOOLS_DIR;
  config.cache_dir = DefaultCacheDir();
  return config;
}

}  // namespace kernelgym
