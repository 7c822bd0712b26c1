// This machine's measured peaks (single core), cached per machine fingerprint.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "core/result.h"
#include "datasets/task.h"

namespace kernelgym {

struct MachinePeaks {
  double gflops = 0;       // single-core peak FP32 FLOP/s, in GFLOP/s
  double gbps = 0;         // best single-core read bandwidth (cache-resident), GB/s
  double dram_gbps = 0;    // single-core bandwidth from memory, GB/s (roofline ridge)
  std::string fingerprint;
};

// Loads `<cache_dir>/peaks-<fingerprint>.json`, or measures with `peaks_program` on the timing
// CPU and writes it. nullopt (with `error`) when the program cannot run.
std::optional<MachinePeaks> LoadOrMeasurePeaks(const std::filesystem::path& cache_dir,
                                               const std::filesystem::path& peaks_program, std::string& error);

// The fastest time any correct kernel can take for the task on `threads` cores:
// max(flops / peak FLOP/s, bytes / peak bandwidth). Scaling peaks by the thread count overstates
// multi-core bandwidth, which only lowers the floor: it never flags an honest kernel.
double PhysicalFloorNs(const Task& task, const MachinePeaks& peaks);

// Roofline position of a measured time.
ProfileReport Roofline(const Task& task, const MachinePeaks& peaks, double median_ns);

}  // namespace kernelgym
