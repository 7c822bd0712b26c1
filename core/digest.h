// Content digests: what the compile cache is keyed by, and what tells two copies of a task apart
// (a job carries its task's digest; a runner holding another copy refuses it: DESIGN.md, reward
// integrity rule 1).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kernelgym {

// Hex SHA-256 of the concatenated parts (each length-prefixed, so part boundaries matter).
std::string Sha256Hex(const std::vector<std::string>& parts);

// Hex SHA-256 of a task folder: every regular file below `dir` by its relative path and bytes,
// in path order. What the interpreter or a tool leaves there (__pycache__, dot files) does not
// count, so a folder that was evaluated from keeps its digest. A file that cannot be read counts
// as its path alone: two copies that both lack it still agree, a copy that has it does not.
std::string TaskFolderDigest(const std::filesystem::path& dir);

}  // namespace kernelgym
