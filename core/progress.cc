#include "core/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kernelgym {

Progress::Progress(std::ostream& out, bool terminal, int total, std::string label)
    : out_(out), terminal_(terminal), total_(total), label_(std::move(label)) {}

void Progress::Step(const std::string& item, const std::string& result) {
  ++done_;
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? std::min(kWidth, kWidth * done_ / total_) : kWidth;
  std::string bar(static_cast<std::size_t>(kWidth + 2), '.');
  bar.front() = '[';
  bar.back() = ']';
  std::fill_n(bar.begin() + 1, filled, '#');
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  // The items so far predict the rest: the mean time per item, times the items left.
  const double left = done_ > 0 && total_ > done_ ? elapsed / done_ * (total_ - done_) : 0;
  std::ostringstream line;
  line << label_ << " " << bar << " " << done_ << "/" << total_ << " " << ShortDuration(elapsed) << " elapsed"
       << (total_ > done_ ? ", ~" + ShortDuration(left) + " left" : "") << " " << item << ": " << result;
  if (terminal_) out_ << "\r\033[K" << line.str() << std::flush;
  else out_ << line.str() << "\n" << std::flush;
}

void Progress::Done() {
  if (terminal_) out_ << "\n" << std::flush;
}

std::string ShortDuration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char text[32];
  if (s < 60) std::snprintf(text, sizeof text, "%lds", s);
  else if (s < 3600) std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  return text;
}

}  // namespace kernelgym
