#include "datasets/trajectory/recorder.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "datasets/trajectory/segments.h"

namespace kernelgym {

namespace {

std::string Errno(const std::string& what, const std::filesystem::path& path) {
  return what + " " + path.string() + ": " + std::strerror(errno);
}

// Makes a new directory entry durable: fdatasync on the file does not cover its name.
bool SyncDirectory(const std::filesystem::path& dir, std::string& error) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    error = Errno("cannot open directory", dir);
    return false;
  }
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) error = Errno("fsync failed on directory", dir);
  ::close(fd);
  return rc == 0;
}

}  // namespace

std::unique_ptr<TrajectoryRecorder> TrajectoryRecorder::Open(const std::filesystem::path& dir, RecorderOptions options,
                                                             std::string& error) {
  if (options.segment_max_bytes == 0 || options.max_batch == 0) {
    error = "recorder options: segment_max_bytes and max_batch must be > 0";
    return nullptr;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    error = "cannot create trajectory store " + dir.string() + ": " + ec.message();
    return nullptr;
  }
  const int event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd < 0) {
    error = std::string("eventfd failed: ") + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<TrajectoryRecorder> recorder(new TrajectoryRecorder(dir, options, event_fd));
  if (!recorder->OpenNextSegment(error)) return nullptr;  // the destructor closes the eventfd

  // The writer thread blocks every signal, so a process-directed SIGTERM / SIGINT reaches the
  // event loop's thread (and interrupts its poll) instead of landing here. Blocking around the
  // creation leaves no window in which the new thread could take one.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  recorder->writer_ = std::thread([r = recorder.get()] { r->Run(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return recorder;
}

TrajectoryRecorder::TrajectoryRecorder(std::filesystem::path dir, RecorderOptions options, int event_fd)
    : dir_(std::move(dir)), options_(options), event_fd_(event_fd) {}

TrajectoryRecorder::~TrajectoryRecorder() {
  Close();
  ::close(event_fd_);
}

void TrajectoryRecorder::Submit(uint64_t token, std::string json_line) {
  std::string refusal;
  if (json_line.empty() || json_line.find('\n') != std::string::npos) {
    refusal = "record line is empty or contains a newline (not one compact JSON object)";
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refusal.empty() && closing_) refusal = "trajectory recorder is closed";
    if (refusal.empty()) {
      queued_bytes_ += json_line.size() + 1;
      queue_.push_back({token, std::move(json_line)});
    } else {
      failed_.push_back({token, refusal});
      ++stats_.failed;
    }
  }
  if (refusal.empty()) {
    wake_writer_.notify_one();
  } else {
    Signal();
  }
}

std::vector<uint64_t> TrajectoryRecorder::TakeDurable() {
  // Drain first, then take: a token published after the drain re-arms the fd, so none is missed.
  uint64_t count;
  [[maybe_unused]] ssize_t n = ::read(event_fd_, &count, sizeof(count));
  std::vector<uint64_t> tokens;
  std::lock_guard<std::mutex> lock(mutex_);
  tokens.swap(durable_);
  return tokens;
}

std::vector<FailedRecord> TrajectoryRecorder::TakeFailed() {
  std::vector<FailedRecord> failed;
  std::lock_guard<std::mutex> lock(mutex_);
  failed.swap(failed_);
  return failed;
}

bool TrajectoryRecorder::healthy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.healthy;
}

RecorderStats TrajectoryRecorder::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  RecorderStats stats = stats_;
  stats.queued = queue_.size() + in_flight_;
  stats.queued_bytes = queued_bytes_;
  return stats;
}

void TrajectoryRecorder::Close() {
  std::lock_guard<std::mutex> close_lock(close_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    closing_ = true;
  }
  wake_writer_.notify_all();
  if (writer_.joinable()) writer_.join();
  CloseSegment();
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

void TrajectoryRecorder::Signal() {
  const uint64_t one = 1;
  // Only fails (EAGAIN) when the counter is near 2^64: the fd is readable then anyway.
  [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof(one));
}

void TrajectoryRecorder::Run() {
  for (;;) {
    std::vector<Pending> batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_writer_.wait(lock, [this] { return !queue_.empty() || closing_; });
      if (queue_.empty()) return;  // closing, and everything queued is written
      const std::size_t n = std::min(queue_.size(), options_.max_batch);
      batch.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        queued_bytes_ -= queue_.front().line.size() + 1;
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      in_flight_ = n;
    }

    std::size_t durable_count = 0;
    std::string error;
    const bool ok = WriteBatch(batch, durable_count, error);
    if (!ok) spdlog::error("trajectory store: {} ({} record(s) not stored)", error, batch.size() - durable_count);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (i < durable_count) {
          durable_.push_back(batch[i].token);
          ++stats_.records_written;
          stats_.bytes_written += batch[i].line.size() + 1;
        } else {
          failed_.push_back({batch[i].token, error});
          ++stats_.failed;
        }
      }
      ++stats_.batches;
      stats_.healthy = ok;
      if (!ok) stats_.last_error = error;
      in_flight_ = 0;
    }
    Signal();
  }
}

bool TrajectoryRecorder::WriteBatch(std::vector<Pending>& batch, std::size_t& durable_count, std::string& error) {
  if (segment_fd_ < 0 && !OpenNextSegment(error)) return false;
  std::string buffer;
  std::size_t buffered_lines = 0;
  // Writes and syncs what is buffered; on failure the segment is given up (truncated back to its
  // durable length) and the next batch starts a new one.
  auto flush = [&]() {
    if (buffer.empty()) return true;
    if (!WriteAll(buffer, error) || !SyncSegment(error)) {
      AbandonSegment();
      return false;
    }
    segment_bytes_ += buffer.size();
    durable_count += buffered_lines;
    buffer.clear();
    buffered_lines = 0;
    return true;
  };
  for (const Pending& pending : batch) {
    const uint64_t size = pending.line.size() + 1;
    const uint64_t used = segment_bytes_ + buffer.size();
    if (used > 0 && used + size > options_.segment_max_bytes) {
      if (!flush()) return false;
      CloseSegment();
      if (!OpenNextSegment(error)) return false;
    }
    buffer += pending.line;
    buffer += '\n';
    ++buffered_lines;
  }
  return flush();
}

bool TrajectoryRecorder::OpenNextSegment(std::string& error) {
  uint64_t number = segment_number_ + 1;
  if (segment_number_ == 0) {
    std::vector<Segment> existing = ListSegments(dir_, error);
    if (!error.empty()) return false;
    if (!existing.empty()) number = existing.back().number + 1;
  }
  // O_EXCL: never append to a segment someone else (another recorder on the same folder) made.
  for (int attempt = 0; attempt < 1000; ++attempt, ++number) {
    const std::filesystem::path path = dir_ / SegmentFileName(number);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      error = Errno("cannot create segment", path);
      return false;
    }
    segment_fd_ = fd;
    segment_number_ = number;
    segment_bytes_ = 0;
    segment_path_ = path;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.segments;
      stats_.segment = path;
    }
    if (!SyncDirectory(dir_, error)) {
      AbandonSegment();
      return false;
    }
    return true;
  }
  error = "cannot create segment in " + dir_.string() + ": 1000 consecutive names already exist";
  return false;
}

bool TrajectoryRecorder::WriteAll(const std::string& data, std::string& error) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(segment_fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = Errno("write failed on", segment_path_);
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool TrajectoryRecorder::SyncSegment(std::string& error) {
  int rc;
  do rc = ::fdatasync(segment_fd_);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    error = Errno("fdatasync failed on", segment_path_);
    return false;
  }
  return true;
}

void TrajectoryRecorder::AbandonSegment() {
  if (segment_fd_ < 0) return;
  // Best effort: cut a partly written batch off so the segment ends at its last durable line
  // (if this fails too, the reader reports the leftover as a torn last line).
  [[maybe_unused]] int rc = ::ftruncate(segment_fd_, static_cast<off_t>(segment_bytes_));
  CloseSegment();
}

void TrajectoryRecorder::CloseSegment() {
  if (segment_fd_ < 0) return;
  ::close(segment_fd_);
  segment_fd_ = -1;
  if (segment_bytes_ == 0) {
    std::error_code ec;
    std::filesystem::remove(segment_path_, ec);
  }
}

}  // namespace kernelgym
