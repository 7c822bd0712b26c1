// What drawing one input element costs (docs/benchmarks.md, "Input generator"): the judge draws
// every input afresh for every timing round, so this is on its critical path. Fills a tensor of
// each common kind with FillInput(spec, buffer, stream) — a signature every version of inputs.cc
// has, so the same source built against an older inputs.cc measures the older generator — and
// prints the median ns per element over --repeats fills. Time is the thread's CPU time, so that
// a loaded machine (other processes preempting the fill) does not count.
//
//   kernelgym_bench_inputs --elements 1048576 --repeats 50
#include <time.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tpu_runner/cpu/inputs.h"
#include "tpu_runner/timing_stats.h"

using namespace kernelgym;

static double ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

int main(int argc, char** argv) {
  CLI::App app("ns per drawn input element, by kind");
  int64_t elements = 1 << 20;
  int repeats = 50;
  app.add_option("--elements", elements, "elements per tensor")->capture_default_str();
  app.add_option("--repeats", repeats, "fills per kind")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  struct Kind {
    std::string name;
    DType dtype;
    Initializer init;
  };
  const std::vector<Kind> kinds = {
      {"float32 normal", DType::kFloat32, {Initializer::Kind::kNormal, 0, 1}},
      {"float32 uniform", DType::kFloat32, {Initializer::Kind::kUniform, -1, 1}},
      {"float64 normal", DType::kFloat64, {Initializer::Kind::kNormal, 0, 1}},
      {"int32 randint", DType::kInt32, {Initializer::Kind::kRandInt, 0, 1000}},
  };
  for (const Kind& kind : kinds) {
    TensorSpec spec;
    spec.name = "x";
    spec.dtype = kind.dtype;
    spec.shape = {elements};
    spec.init = kind.init;
    std::vector<std::byte> buffer(spec.NumBytes());
    std::vector<double> ns;
    for (int r = 0; r < repeats; ++r) {
      const double start = ThreadCpuNs();
      FillInput(spec, buffer, static_cast<uint64_t>(r) + 1);
      ns.push_back(ThreadCpuNs() - start);
    }
    std::printf("%-16s %8.3f ns/element of CPU time (median of %d fills of %lld)\n", kind.name.c_str(),
                Percentile(ns, 0.5) / static_cast<double>(elements), repeats, static_cast<long long>(elements));
  }
}
