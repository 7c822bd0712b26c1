// The reference's estimate cache (tpu_runner/pallas/reference_estimate_cache.h): an entry is
// found for exactly the content it was stored for, in memory and on disk, and an entry on disk
// that says it is for other content, or does not read as the protocol's estimate, is no entry.
#include "tpu_runner/pallas/reference_estimate_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

namespace kernelgym {
namespace {

namespace fs = std::filesystem;

fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kg-ref-cache-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  return dir;
}

ReferenceEstimateKey Key() {
  return ReferenceEstimateKey{.judge_code = "j1", .packages = "jax-0.10.2 libtpu-0.0.42.1", .target = "v5e",
                              .device_kind = "TPU v5 lite", .jax = "0.10.2", .on_tpu = false,
                              .task_id = "jaxbench-p/gemm", .layout = "kernelgym", .suite = "jaxbench-p",
                              .task_files = "f1"};
}

judge::ReferenceEstimate Estimate(double us) {
  return judge::ReferenceEstimate{.estimated_us = us, .xla_model_us = us, .trusted = true, .flops = 2e12,
                                  .bytes_accessed = 1e9, .error = ""};
}

TEST(ReferenceEstimateCache, AnEntryIsFoundForItsContentOnlyAndOutlivesTheProcessOnDisk) {
  const fs::path dir = FreshDir("disk");
  {
    ReferenceEstimateCache cache(dir);
    EXPECT_FALSE(cache.Find(Key()).has_value());
    cache.Store(Key(), Estimate(19534.5));
    ASSERT_TRUE(cache.Find(Key()).has_value());
  }
  ReferenceEstimateCache later(dir);  // a new runner: memory empty, the disk remembers
  const auto found = later.Find(Key());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, Estimate(19534.5));
  // Each fact of the key separates entries: another task file, judge, package set or target.
  for (auto change : {+[](ReferenceEstimateKey& k) { k.task_files = "f2"; },
                      +[](ReferenceEstimateKey& k) { k.judge_code = "j2"; },
                      +[](ReferenceEstimateKey& k) { k.packages = "jax-0.10.2 libtpu-0.0.43"; },
                      +[](ReferenceEstimateKey& k) { k.target = "v6e"; },
                      +[](ReferenceEstimateKey& k) { k.task_id = "jaxbench-p/gemm2"; },
                      +[](ReferenceEstimateKey& k) { k.on_tpu = true; }}) {
    ReferenceEstimateKey other = Key();
    change(other);
    EXPECT_NE(other.Material(), Key().Material());
    EXPECT_FALSE(later.Find(other).has_value()) << other.Material();
  }
  fs::remove_all(dir);
}

TEST(ReferenceEstimateCache, AFailedEstimateIsNotKept) {
  const fs::path dir = FreshDir("failed");
  ReferenceEstimateCache cache(dir);
  judge::ReferenceEstimate failed = Estimate(0);
  failed.error = "TimeoutError: the compile took too long";
  cache.Store(Key(), failed);
  EXPECT_FALSE(cache.Find(Key()).has_value());
  EXPECT_FALSE(fs::exists(dir / ReferenceEstimateCache::FileName(Key())));
  fs::remove_all(dir);
}

TEST(ReferenceEstimateCache, AnEntryForOtherContentOrNotAnEstimateIsNoEntry) {
  const fs::path dir = FreshDir("forged");
  ReferenceEstimateKey other = Key();
  other.task_files = "f2";
  {
    ReferenceEstimateCache writer(dir);
    writer.Store(other, Estimate(1.0));
  }
  // The other content's entry under this content's name: its recorded material differs.
  fs::rename(dir / ReferenceEstimateCache::FileName(other), dir / ReferenceEstimateCache::FileName(Key()));
  EXPECT_FALSE(ReferenceEstimateCache(dir).Find(Key()).has_value());
  // The right material with an estimate that does not read as the protocol's.
  std::ifstream in(dir / ReferenceEstimateCache::FileName(Key()));
  nlohmann::json entry = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  entry["material"] = Key().Material();
  entry["reference"]["estimate"]["estimated_us"] = "fast";
  std::ofstream(dir / ReferenceEstimateCache::FileName(Key()), std::ios::trunc) << entry.dump();
  EXPECT_FALSE(ReferenceEstimateCache(dir).Find(Key()).has_value());
  std::ofstream(dir / ReferenceEstimateCache::FileName(Key()), std::ios::trunc) << "{not json";
  EXPECT_FALSE(ReferenceEstimateCache(dir).Find(Key()).has_value());
  fs::remove_all(dir);
}

TEST(ReferenceEstimateCache, WithoutAFolderItRemembersInMemoryOnly) {
  ReferenceEstimateCache cache{fs::path()};
  cache.Store(Key(), Estimate(5.0));
  EXPECT_TRUE(cache.Find(Key()).has_value());
  EXPECT_FALSE(ReferenceEstimateCache{fs::path()}.Find(Key()).has_value());
}

TEST(ReferenceEstimateCache, TheJudgesCodeAndPackagesAreRead) {
  const fs::path dir = FreshDir("package");
  fs::create_directories(dir / "kernelgym_pallas");
  std::ofstream(dir / "kernelgym_pallas" / "tpu_estimate.py") << "CLOCK = 1.5e9\n";
  const std::string before = JudgeCodeDigest(dir);
  std::ofstream(dir / "kernelgym_pallas" / "tpu_estimate.py") << "CLOCK = 1.75e9\n";
  EXPECT_NE(JudgeCodeDigest(dir), before) << "a change to the estimator must change the key";
  fs::create_directories(dir / "venv/bin");
  fs::create_directories(dir / "venv/lib/python3.11/site-packages/libtpu-0.0.42.1.dist-info");
  fs::create_directories(dir / "venv/lib/python3.11/site-packages/jax-0.10.2.dist-info");
  EXPECT_EQ(InstalledPackages(dir / "venv/bin/python"), "jax-0.10.2 libtpu-0.0.42.1");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kernelgym
