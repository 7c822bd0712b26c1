#include "env/server/patch_workers.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace kernelgym::server {

PatchWorkers::PatchWorkers(int threads) {
  notify_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (notify_fd_ < 0) throw std::runtime_error("eventfd failed");
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Work(); });
}

PatchWorkers::~PatchWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
  close(notify_fd_);
}

void PatchWorkers::Submit(uint64_t token, std::string source, std::string diff) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back({token, std::move(source), std::move(diff)});
  }
  work_.notify_one();
}

std::vector<PatchWorkers::Done> PatchWorkers::TakeDone() {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = read(notify_fd_, &count, sizeof count);  // EAGAIN when none: fine
  std::lock_guard lock(mutex_);
  return std::exchange(done_, {});
}

void PatchWorkers::Work() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Done done{job.token, ApplyPatch(job.source, job.diff)};
    {
      std::lock_guard lock(mutex_);
      done_.push_back(std::move(done));
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(notify_fd_, &one, sizeof one);
  }
}

}  // namespace kernelgym::server
