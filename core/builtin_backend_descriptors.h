// The backends' own descriptors (tpu_runner/<backend>/descriptor.json), as the build found them:
// core/CMakeLists.txt writes the definition into the build folder. Read through KnownBackends().
#pragma once

namespace kernelgym {

extern const char* const kBuiltinBackendDescriptors[];
extern const int kBuiltinBackendDescriptorCount;

}  // namespace kernelgym
