// Progress of a command that runs longer than a few seconds (evaluate, collect, tasks --measure):
// i/N, the elapsed time and an estimate of the time left. On a terminal, a bar redrawn in place;
// elsewhere (a log, CI), one line per item.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

namespace kernelgym {

class Progress {
 public:
  Progress(std::ostream& out, bool terminal, int total, std::string label);
  // One item done: "LABEL [#####.....] 3/6 12s elapsed, ~12s left ITEM: RESULT".
  void Step(const std::string& item, const std::string& result);
  void Done();

 private:
  std::ostream& out_;
  bool terminal_;
  int total_, done_ = 0;
  std::string label_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// "42s", "3m05s", "1h02m": a duration as a person reads it.
std::string ShortDuration(double seconds);

}  // namespace kernelgym
