// The backend descriptors (core/backend_info.h): every registered backend has one, each is
// consistent, and the unknown fall back to C++ without inventing a name.
#include "core/backend_info.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "tpu_runner/backend.h"

namespace kernelgym {
namespace {

TEST(BackendInfo, EveryRegisteredBackendIsDescribed) {
  RegisterBuiltinBackends();
  const std::vector<std::string> names = BackendRegistry::Global().Names();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) EXPECT_NE(FindBackendInfo(name), nullptr) << name << " has no descriptor";
}

TEST(BackendInfo, EachDescriptorIsConsistent) {
  std::set<std::string> seen;
  for (const BackendInfo& info : KnownBackends()) {
    SCOPED_TRACE(info.name);
    EXPECT_TRUE(seen.insert(info.name).second) << "two descriptors for one name";
    EXPECT_FALSE(info.language.empty());
    // The tag a prompt asks for must be one the reply parser takes, and so must an untagged block.
    EXPECT_NE(std::find(info.fence_tags.begin(), info.fence_tags.end(), info.language), info.fence_tags.end());
    EXPECT_NE(std::find(info.fence_tags.begin(), info.fence_tags.end(), ""), info.fence_tags.end());
    EXPECT_FALSE(info.source_file.empty());
    EXPECT_EQ(info.source_file.find('/'), std::string::npos);
    EXPECT_FALSE(info.description.empty());
    EXPECT_EQ(ToJson(info).at("name"), info.name);
  }
  EXPECT_EQ(KnownBackends().front().name, "cpu") << "the default backend comes first";
}

// The descriptors come from the backends' own folders (tpu_runner/<name>/descriptor.json), compiled
// in by the build: one per folder, each read whole, the fields the task loader and clients use.
TEST(BackendInfo, EachBackendFolderDescribesItself) {
  std::set<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(KERNELGYM_SOURCE_DIR) / "tpu_runner"))
    if (std::filesystem::exists(entry.path() / "descriptor.json")) folders.insert(entry.path().filename().string());
  std::set<std::string> described;
  for (const BackendInfo& info : KnownBackends()) {
    SCOPED_TRACE(info.name);
    described.insert(info.name);
    EXPECT_TRUE(info.task_loader == "root" || info.task_loader == "folder" || info.task_loader == "none") << info.task_loader;
    if (info.task_loader == "folder") EXPECT_FALSE(info.task_folder.empty());
    std::string problem;
    EXPECT_EQ(BackendInfoFromJson(ToJson(info), problem), info) << problem;
  }
  EXPECT_EQ(described, folders) << "a descriptor per backend folder, named as its folder";
  std::string problem;
  nlohmann::json missing = ToJson(KnownBackends().front());
  missing.erase("task_loader");
  EXPECT_FALSE(BackendInfoFromJson(missing, problem));
  EXPECT_NE(problem.find("task_loader"), std::string::npos) << problem;
}

TEST(BackendInfo, AnUnknownNameIsNotFoundAndFallsBackToCpp) {
  EXPECT_EQ(FindBackendInfo("no-such-backend"), nullptr);
  EXPECT_EQ(BackendInfoOr("no-such-backend").language, "cpp");
  EXPECT_EQ(BackendInfoOr("pallas").language, "python");
  EXPECT_EQ(BackendInfoOr("pallas").task_folder, "pallas");
}

}  // namespace
}  // namespace kernelgym
