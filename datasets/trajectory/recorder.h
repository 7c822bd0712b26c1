// The trajectory store's writer: the server hands it one JSON line per reset / step and learns,
// through an eventfd, when each line is on disk.
//
// Why JSONL segments and not SQLite: the store is append-only (records are never updated or
// queried in place), and its consumers are offline tools — pandas `read_json(lines=True)` and the
// Hugging Face `datasets` "json" loader read a segment file directly, `cat`/`jq`/`grep` work, and
// nothing extra is linked or installed. Crash safety needs no database either: a line is durable
// once fdatasync returns after it (one fdatasync per batch of lines: group commit), and the only
// damage a crash can leave is a torn last line in the segment being written, which
// TrajectoryReader skips and counts. A new recorder never appends to an existing segment, so a
// torn tail stays at the end of its file instead of being glued to the next record.
//
// Threads and ownership: the server's event loop owns the recorder and calls Submit /
// TakeDurable / TakeFailed / stats; one writer thread, owned by the recorder, owns the segment
// file. They share only the queue and the result lists, under `mutex_`. Submit never touches the
// disk, so the event loop never waits on it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kernelgym {

struct RecorderOptions {
  // A segment is closed and the next one started before a line would take it past this size
  // (a single line larger than this gets a segment of its own).
  uint64_t segment_max_bytes = uint64_t{64} << 20;
  // The most lines written per fdatasync (group commit); more queued lines wait for the next batch.
  std::size_t max_batch = 512;
};

// A record that could not be stored (disk full, EIO, recorder closed, a line with a newline).
// It may or may not be in the store; the recorder only promises lines whose token was durable.
struct FailedRecord {
  uint64_t token = 0;
  std::string error;
};

struct RecorderStats {
  uint64_t records_written = 0;  // lines made durable since Open
  uint64_t bytes_written = 0;    // their bytes, newlines included
  uint64_t batches = 0;          // fdatasync groups
  uint64_t segments = 0;         // segment files created since Open
  uint64_t failed = 0;           // records reported through TakeFailed
  uint64_t queued = 0;           // submitted, not yet durable or failed
  uint64_t queued_bytes = 0;
  bool healthy = true;
  std::string last_error;         // "" until a write fails; kept after recovery
  std::filesystem::path segment;  // the segment being written
};

class TrajectoryRecorder {
 public:
  // Creates `dir` if needed and starts segment N+1 after the highest existing one N. nullptr and
  // `error` (what failed, on which path) when the folder or the segment cannot be created.
  [[nodiscard]] static std::unique_ptr<TrajectoryRecorder> Open(const std::filesystem::path& dir,
                                                                RecorderOptions options, std::string& error);

  TrajectoryRecorder(const TrajectoryRecorder&) = delete;
  TrajectoryRecorder& operator=(const TrajectoryRecorder&) = delete;
  ~TrajectoryRecorder();  // Close()

  // Queues one record. `json_line` is one compact JSON object without a newline (the caller's
  // json::dump() output); the recorder adds the newline and does not parse it. `token` is the
  // caller's (e.g. the request it must answer); it comes back exactly once, from TakeDurable or
  // TakeFailed. Thread-safe; never waits on the disk.
  void Submit(uint64_t token, std::string json_line);

  // An eventfd that is readable when TakeDurable or TakeFailed has something. Poll it as a raw fd
  // (zmq_poll); on readable call TakeDurable() first (it drains the fd), then TakeFailed().
  // Wake-ups may be spurious (both lists empty). Owned by the recorder; valid until destruction.
  int notify_fd() const { return event_fd_; }

  // Tokens whose lines are durable (written and fdatasync'ed), in the order they were written
  // (= the order of Submit). Drains notify_fd.
  std::vector<uint64_t> TakeDurable();
  // Tokens whose lines could not be stored, with the error. Does not drain notify_fd.
  std::vector<FailedRecord> TakeFailed();

  // False while the store is failing: after a batch failed and until a later batch succeeds.
  bool healthy() const;
  RecorderStats stats() const;

  // Writes and fdatasyncs everything queued, stops the writer thread and closes the segment
  // (removing it if it stayed empty). Durable / failed tokens of the last batches remain
  // available through TakeDurable / TakeFailed; later Submit calls fail their token at once.
  // Idempotent. Blocks until the queue is on disk and is not async-signal-safe: on SIGTERM, call
  // it from the event loop once the signal was noticed, not from the handler.
  void Close();

 private:
  struct Pending {
    uint64_t token;
    std::string line;
  };

  TrajectoryRecorder(std::filesystem::path dir, RecorderOptions options, int event_fd);

  // Writer thread.
  void Run();
  // Writes and fdatasyncs `batch` in order; the first `durable_count` lines are durable even when
  // it fails (a rotation inside the batch syncs the earlier segment first).
  bool WriteBatch(std::vector<Pending>& batch, std::size_t& durable_count, std::string& error);
  bool OpenNextSegment(std::string& error);
  bool WriteAll(const std::string& data, std::string& error);
  bool SyncSegment(std::string& error);
  void AbandonSegment();
  void CloseSegment();

  void Signal();

  const std::filesystem::path dir_;
  const RecorderOptions options_;
  const int event_fd_;

  // Writer-thread state (and Open/Close before the thread starts / after it ended).
  int segment_fd_ = -1;
  uint64_t segment_number_ = 0;  // of the segment being written, or the last one
  uint64_t segment_bytes_ = 0;   // durable bytes in it
  std::filesystem::path segment_path_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_writer_;
  std::deque<Pending> queue_;
  uint64_t queued_bytes_ = 0;
  std::size_t in_flight_ = 0;  // lines taken by the writer, not yet reported
  bool closing_ = false;
  bool closed_ = false;
  std::vector<uint64_t> durable_;
  std::vector<FailedRecord> failed_;
  RecorderStats stats_;

  std::mutex close_mutex_;  // serializes Close (an explicit call and the destructor's)
  std::thread writer_;
};

}  // namespace kernelgym
