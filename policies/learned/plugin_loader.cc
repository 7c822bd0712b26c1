#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "policies/learned/model_api.h"

namespace kernelgym::learned {

const ModelPlugin* LoadModelPlugin(std::string& error) {
  static std::once_flag once;
  static const ModelPlugin* plugin = nullptr;
  static std::string load_error;
  std::call_once(once, [] {
    const char* env = std::getenv("KERNELGYM_LEARNED_PLUGIN");
    const std::string path = env && *env ? env : KERNELGYM_LEARNED_PLUGIN;
    // RTLD_LOCAL: libtorch's symbols stay in the plugin's scope. Never dlclose'd: models it
    // created may live until exit.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      load_error = "cannot load the learned-model plugin " + path + ": " + (why ? why : "dlopen failed") +
                   " (set KERNELGYM_LEARNED_PLUGIN to its path)";
      return;
    }
    using Entry = const ModelPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, kModelPluginSymbol));
    if (!entry) {
      load_error = path + " has no " + kModelPluginSymbol + ": not a kernelgym learned-model plugin";
      return;
    }
    const ModelPlugin* candidate = entry();
    if (!candidate || candidate->abi_version != kModelPluginAbi) {
      load_error = path + " is a plugin of another kernelgym build (ABI " +
                   std::to_string(candidate ? candidate->abi_version : -1) + ", expected " +
                   std::to_string(kModelPluginAbi) + ")";
      return;
    }
    plugin = candidate;
  });
  if (!plugin) error = load_error;
  return plugin;
}

}  // namespace kernelgym::learned
