// The plugin's one exported symbol (everything else is hidden): the table of entry points that
// LoadModelPlugin() looks up after dlopen.
#include "policies/learned/plugin/models.h"

namespace {

const kernelgym::learned::ModelPlugin kPlugin = {
    kernelgym::learned::kModelPluginAbi,
    &kernelgym::learned::plugin::CreatePolicy,
    &kernelgym::learned::plugin::LoadPolicy,
    &kernelgym::learned::plugin::CreateCostModel,
    &kernelgym::learned::plugin::LoadCostModel,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const kernelgym::learned::ModelPlugin* kernelgym_learned_plugin() {
  return &kPlugin;
}
