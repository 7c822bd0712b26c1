// The candidate compile cache (tpu_runner/pallas/candidate_compile_cache.h): an entry is found for
// exactly the program and evaluation content it was stored for, in memory and on disk; a key that
// is not the judge's SHA-256 is never looked up or stored; an entry on disk for other material, or
// one that does not read as the protocol's facts, is no entry.
#include "tpu_runner/pallas/candidate_compile_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

namespace kernelgym {
namespace {

namespace fs = std::filesystem;

fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kg-compile-cache-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  return dir;
}

CandidateCompileKey Key(const std::string& program = std::string(64, 'a')) {
  return CandidateCompileKey{
      .evaluation = ReferenceEstimateKey{.judge_code = "j1", .packages = "jax-0.10.2 libtpu-0.0.42.1", .target = "v5e",
                                         .device_kind = "TPU v5 lite", .jax = "0.10.2", .on_tpu = false,
                                         .task_id = "jaxbench-p/gemm", .layout = "kernelgym", .suite = "jaxbench-p",
                                         .task_files = "f1"},
      .program = program};
}

judge::CompileFacts Facts(double us) {
  judge::CompileFacts facts;
  facts.tpu_compile = judge::TpuCompile{.target = "v5e", .device_kind = "TPU v5 lite", .deviceless = true,
                                        .seconds = 0.4, .memory = {{"argument_size_in_bytes", 1e6}}};
  facts.estimate = judge::CandidateEstimate{.estimated_us = us, .mosaic_cycles = 1e6, .xla_us = 0, .trusted = true,
                                            .reasons = {}, .method = "llo", .kernels = {}};
  return facts;
}

TEST(CandidateCompileCache, AnEntryIsFoundForItsContentOnlyAndOutlivesTheProcessOnDisk) {
  const fs::path dir = FreshDir("disk");
  {
    CandidateCompileCache cache(dir);
    EXPECT_FALSE(cache.Find(Key()).has_value());
    cache.Store(Key(), Facts(1234.5));
    ASSERT_TRUE(cache.Find(Key()).has_value());
  }
  CandidateCompileCache later(dir);  // a new runner: memory empty, the disk remembers
  const auto found = later.Find(Key());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, Facts(1234.5));
  // Another program, or the same program for another task's files, judge or target: no entry.
  for (auto change : {+[](CandidateCompileKey& k) { k.program[63] = 'b'; },
                      +[](CandidateCompileKey& k) { k.evaluation.task_files = "f2"; },
                      +[](CandidateCompileKey& k) { k.evaluation.judge_code = "j2"; },
                      +[](CandidateCompileKey& k) { k.evaluation.target = "v6e"; }}) {
    CandidateCompileKey other = Key();
    change(other);
    EXPECT_NE(other.Material(), Key().Material());
    EXPECT_FALSE(later.Find(other).has_value()) << other.Material();
  }
  fs::remove_all(dir);
}

TEST(CandidateCompileCache, OnlyTheJudgesShaIsAKeyAndOnlyACompilesFactsAreKept) {
  CandidateCompileCache cache{fs::path()};
  for (const std::string& bad : {std::string(63, 'a'), std::string(64, 'A'), std::string(64, 'g'), std::string("../x")}) {
    EXPECT_FALSE(IsProgramKey(bad)) << bad;
    cache.Store(Key(bad), Facts(1));
    EXPECT_FALSE(cache.Find(Key(bad)).has_value()) << bad;
  }
  EXPECT_TRUE(IsProgramKey(std::string(64, 'f')));
  judge::CompileFacts none;  // no compile: nothing to keep
  cache.Store(Key(), none);
  EXPECT_FALSE(cache.Find(Key()).has_value());
}

TEST(CandidateCompileCache, AnEntryOnDiskForOtherMaterialOrNotTheProtocolsIsNoEntry) {
  const fs::path dir = FreshDir("forged");
  {
    CandidateCompileCache cache(dir);
    cache.Store(Key(), Facts(10));
  }
  const fs::path file = dir / CandidateCompileCache::FileName(Key());
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto found_after = [&](const std::string& written) {
    std::ofstream(file, std::ios::trunc) << written;
    return CandidateCompileCache(dir).Find(Key()).has_value();
  };
  EXPECT_TRUE(found_after(text));
  std::string other_program = text;
  other_program.replace(other_program.find(std::string(64, 'a')), 64, std::string(64, 'c'));
  EXPECT_FALSE(found_after(other_program));
  std::string not_facts = text;
  not_facts.replace(not_facts.find("\"compile_facts\""), 15, "\"progress\"     ");
  EXPECT_FALSE(found_after(not_facts));
  EXPECT_FALSE(found_after("{}"));
  EXPECT_FALSE(found_after("not json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kernelgym
