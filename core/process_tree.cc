#include "core/process_tree.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>

namespace kernelgym {
namespace {

struct StatLine {
  pid_t parent = 0;
  unsigned long long ticks = 0;  // utime + stime + cutime + cstime
};

// /proc/PID/stat's parent and CPU ticks. The command name (field 2) is in parentheses and may
// hold spaces and parentheses itself: the fields are read after its last ')'.
std::optional<StatLine> ReadStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  // Fields 3.. : state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime.
  std::string state;
  long long parent = 0;
  unsigned long long skip = 0, utime = 0, stime = 0;
  long long cutime = 0, cstime = 0;
  fields >> state >> parent;
  for (int i = 0; i < 9; ++i) fields >> skip;
  fields >> utime >> stime >> cutime >> cstime;
  if (!fields) return std::nullopt;
  return StatLine{static_cast<pid_t>(parent),
                  utime + stime + static_cast<unsigned long long>(std::max(0LL, cutime) + std::max(0LL, cstime))};
}

}  // namespace

std::vector<TreeProcess> ProcessTree(pid_t root) {
  if (root <= 0) return {};
  // Every process's parent: the kernel keeps no list of a process's descendants that every
  // kernel shows (/proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN), so /proc is scanned.
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  std::unordered_map<pid_t, unsigned long long> ticks;
  DIR* proc = opendir("/proc");
  if (!proc) return {};
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    if (const std::optional<StatLine> stat = ReadStat(static_cast<pid_t>(pid))) {
      children[stat->parent].push_back(static_cast<pid_t>(pid));
      ticks[static_cast<pid_t>(pid)] = stat->ticks;
    }
  }
  closedir(proc);
  std::vector<TreeProcess> tree;
  if (!ticks.count(root)) return tree;
  std::vector<pid_t> pending = {root};
  while (!pending.empty()) {
    const pid_t pid = pending.back();
    pending.pop_back();
    tree.push_back({pid, ticks[pid]});
    if (auto it = children.find(pid); it != children.end())
      pending.insert(pending.end(), it->second.begin(), it->second.end());
  }
  return tree;
}

}  // namespace kernelgym
