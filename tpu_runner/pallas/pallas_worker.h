// The judge's and the tracer's processes as the pallas backend drives them: judge_protocol.h's
// messages, one per line, on a report pipe (from it) and a control socket (to it), stderr kept for the verdict, and how the process
// ended. A worker serves one evaluation. It is either forked for that job by a fork server
// (tpu_runner/pallas/kernelgym_pallas/forkserver.py: a sandboxed Python that imported jax once
// and forks a fresh process per job, one job at a time) or, without bubblewrap's namespaces, a
// process started for the job in a sandbox of its own.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/resident_limit.h"
#include "core/subprocess.h"
#include "tpu_runner/pallas/judge_protocol.h"
#include "tpu_runner/pallas/pallas_backend.h"

namespace kernelgym {

class PallasForkServer;
class PallasWorkerPool;

struct PallasWorker {
  using Clock = std::chrono::steady_clock;
  PallasWorker() = default;
  PallasWorker(const PallasWorker&) = delete;
  PallasWorker& operator=(const PallasWorker&) = delete;
  // Ends the process (a forked one is let finish and its server goes back to the pool when the
  // server says the job left nothing behind) and empties or removes the job folder.
  ~PallasWorker();

  // kGarbled: a line that is not a message of this protocol version (`garbled` says why).
  enum class Read { kEvent, kTimeout, kClosed, kGarbled };
  // The next message, waiting until `deadline`; drains stderr meanwhile (a full pipe would
  // stall the process).
  Read Next(Clock::time_point deadline, judge::Message& message);
  bool Send(const judge::Message& message);
  // The next complete line already buffered, if there is one; Fill reads what the report pipe
  // holds now (false once it is closed).
  std::optional<Read> Buffered(judge::Message& message);
  bool Fill();

  // SIGKILL now. A forked process goes with its fork server (and its sandbox).
  void Kill();
  // The job is over: lets the process end by itself (its control channel closes), killing it if
  // it has not by `deadline`. After this nothing of it runs.
  void Finish(Clock::time_point deadline);
  // Waits until the process has ended (false if `deadline` passed first).
  bool AwaitEnd(Clock::time_point deadline);
  void DrainOutput();
  int stderr_fd() const;
  const std::string& stderr_text() const;
  // How it ended: the signal that killed it (0 if none), else its exit code.
  int signal() const;
  int exit_code() const;
  // The process whose tree holds this job's process and nothing of another job's: its fork
  // server's sandbox (the server itself waits while its one job runs), or its own. The job is
  // charged for this tree's CPU time (core/process_cpu.h).
  pid_t tree_pid() const;
  // The watchdog over that tree's resident memory (the settings' limit for its role), from the
  // worker's start to its end; null where it could not start (no process). A tree it ended was
  // killed (SIGKILL) for holding more than the limit: resident_verdict() says so, with the bytes.
  const ResidentLimit* resident() const { return resident_.get(); }
  bool resident_exceeded() const { return resident_ && resident_->exceeded(); }
  std::string resident_verdict() const;

  std::string role;  // "judge" or "tracer", for messages
  int control_fd = -1, report_fd = -1;
  std::filesystem::path job_dir;  // bound writable at the same path inside its sandbox
  std::string buffer;
  std::string garbled;
  bool closed = false;                   // the report pipe reached its end
  std::optional<judge::Ready> ready;     // its Ready message, once read
  bool forked_ahead = false;             // forked when its server came back, before its evaluation

 private:
  friend class PallasWorkerPool;

  ChildProcess child_;                          // a process of its own
  std::unique_ptr<PallasForkServer> server_;    // or: the server that forked it, ours until it ends
  PallasWorkerPool* pool_ = nullptr;            // where that server goes back to
  int stderr_fd_ = -1;                          // a forked process's stderr
  std::string stderr_text_;
  bool ended_ = false;
  bool clean_ = false;                          // its server emptied /tmp after it
  int exit_code_ = -1, signal_ = 0;
  // Last: stopped first, before the process or its server goes (the destructor stops it before
  // the server goes back to its pool and forks another job's process into the same tree).
  std::unique_ptr<ResidentLimit> resident_;
};

// The next event of whichever worker says something first: (index, what was read). A worker
// whose deadline passes first is reported with kTimeout; every worker's stderr is drained.
std::pair<std::size_t, PallasWorker::Read> NextOfWorkers(
    const std::vector<std::pair<PallasWorker*, PallasWorker::Clock::time_point>>& waiting, judge::Message& message);

// The workers of one role (judge or tracer) for one backend: idle fork servers, at most one job
// each at a time. Outlives every worker it gives out.
class PallasWorkerPool {
 public:
  // `fork_ahead`: when a fork server comes back after a job, the next job's process is forked
  // from it at once and kept (one spare), so that the next evaluation finds it ready (served use;
  // off for a one-shot evaluation, where it would be wasted).
  PallasWorkerPool(PallasSettings settings, std::filesystem::path scratch, PallasBackend::Role role, bool fork_ahead);
  ~PallasWorkerPool();

  // A worker for one job, forked by an idle server (or a new one), or started on its own.
  std::unique_ptr<PallasWorker> Take(std::string& error);
  // Starts a fork server ahead of time when none is idle, so that the next job finds one (served
  // judges: forks the next job's process from another server, ForkSpareFromAnotherServer).
  void Prestart();
  // Whether jobs are forked by a fork server (inside bubblewrap's namespaces) here.
  bool forking() const { return forking_; }

 private:
  friend struct PallasWorker;
  // A lent server comes back: kept for the next job when `reusable`, else ended.
  void Return(std::unique_ptr<PallasForkServer> server, bool reusable);
  // A worker forked by `server` (counted lent already); nullptr, with the server given back, if it
  // could not be forked.
  std::unique_ptr<PallasWorker> ForkFrom(std::unique_ptr<PallasForkServer> server, std::string& error);
  // Served judges: the next job's process forked now, while this job runs, from a server this job
  // does not hold (an idle one, or a second one started for it). A judge holds its server for the
  // whole evaluation, and a server forks only after its job has ended, so with one server a
  // request that follows another at once waited for the fork and the target's opening (~0.2 s);
  // with two they take jobs in turn. Tracers end mid-evaluation: their server forks ahead in time.
  void ForkSpareFromAnotherServer();
  // The next job's process forked from `server` (counted lent already) and kept as the spare
  // (ended instead where a spare is kept already or the pool is closing).
  void ForkSpare(std::unique_ptr<PallasForkServer> server);


  PallasSettings settings_;
  std::filesystem::path scratch_;
  PallasBackend::Role role_;
  bool forking_ = false;
  std::uint64_t resident_limit_ = 0;  // each worker's: the settings' for its role and host
  std::mutex mutex_;
  std::vector<std::unique_ptr<PallasForkServer>> idle_;  // guarded by mutex_
  std::size_t lent_ = 0;                                 // servers serving a job; guarded
  bool fork_ahead_ = false;
  bool closing_ = false;                                 // the pool is going: no more forks; guarded
  // One started ahead (without forking), or forked ahead by a server that came back; guarded.
  std::unique_ptr<PallasWorker> spare_;
};

// A TPU VM's chips, as device nodes: /dev/accel* (v4, v5e, v6e) or /dev/vfio (v5p on).
std::vector<std::string> TpuDevices();

}  // namespace kernelgym
