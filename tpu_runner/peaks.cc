#include "tpu_runner/peaks.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/subprocess.h"
#include "tpu_runner/machine.h"

namespace kernelgym {

std::optional<MachinePeaks> LoadOrMeasurePeaks(const std::filesystem::path& cache_dir,
                                               const std::filesystem::path& peaks_program, std::string& error) {
  const std::string fingerprint = MachineFingerprint();
  const std::filesystem::path file = cache_dir / ("peaks-" + fingerprint + ".json");
  nlohmann::json j;
  std::ifstream in(file);
  bool have = false;
  if (in) {
    try {
      j = nlohmann::json::parse(in);
      have = true;
    } catch (const nlohmann::json::exception&) {
    }
  }
  if (!have) {
    SpawnOptions options;
    options.argv = {peaks_program.string()};
    options.env = {"PATH=/usr/bin:/bin"};
    options.cpus = TimingCpus(1);
    const ProcessResult r = RunProcess(options, 60);
    if (!r.ok()) {
      error = peaks_program.string() + " " + r.Describe(60) + ": " + HeadLines(r.stderr_text, 3);
      return std::nullopt;
    }
    try {
      j = nlohmann::json::parse(r.stdout_text);
    } catch (const nlohmann::json::exception& e) {
      error = std::string("peaks output is not JSON: ") + e.what();
      return std::nullopt;
    }
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    const std::filesystem::path tmp = file.string() + ".tmp";
    std::ofstream(tmp) << j.dump(2) << "\n";
    std::filesystem::rename(tmp, file, ec);
  }
  MachinePeaks peaks;
  peaks.gflops = j.value("peak_gflops", 0.0);
  peaks.gbps = j.value("peak_gbps", 0.0);
  peaks.dram_gbps = j.value("dram_gbps", 0.0);
  peaks.fingerprint = fingerprint;
  if (peaks.gflops <= 0 || peaks.gbps <= 0) {
    error = "peaks file " + file.string() + " has no usable figures";
    return std::nullopt;
  }
  return peaks;
}

double PhysicalFloorNs(const Task& task, const MachinePeaks& peaks) {
  const double cores = std::max(1, task.threads);
  const double compute_ns = task.flops / (peaks.gflops * cores);  // GFLOP/s == FLOP/ns
  const double memory_ns = task.bytes / (peaks.gbps * cores);      // GB/s == B/ns
  return std::max(compute_ns, memory_ns);
}

ProfileReport Roofline(const Task& task, const MachinePeaks& peaks, double median_ns) {
  ProfileReport p;
  const double cores = std::max(1, task.threads);
  p.peak_gflops = peaks.gflops * cores;
  p.peak_gbps = (peaks.dram_gbps > 0 ? peaks.dram_gbps : peaks.gbps) * cores;
  p.arithmetic_intensity = task.bytes > 0 ? task.flops / task.bytes : 0;
  p.achieved_gflops = median_ns > 0 ? task.flops / median_ns : 0;
  p.achieved_gbps = median_ns > 0 ? task.bytes / median_ns : 0;
  const double ridge = p.peak_gflops / p.peak_gbps;  // flops per byte where the roofs meet
  p.bound = p.arithmetic_intensity >= ridge ? "compute" : "memory";
  p.fraction_of_peak = p.bound == "compute" ? p.achieved_gflops / p.peak_gflops : p.achieved_gbps / p.peak_gbps;
  p.floor_ns = PhysicalFloorNs(task, peaks);
  return p;
}

}  // namespace kernelgym
