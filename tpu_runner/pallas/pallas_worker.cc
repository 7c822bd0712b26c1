#include "tpu_runner/pallas/pallas_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "tpu_runner/sandbox.h"

namespace kernelgym {

using Clock = PallasWorker::Clock;

namespace {

constexpr int kControlFd = 3;  // runner -> worker: the job (a fork server: each job's descriptors)
constexpr int kReportFd = 4;   // worker -> runner: one JSON event per line
// How long a finished job's forked process may take to end before its server is killed.
constexpr double kEndGraceSeconds = 1;

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

std::string RoleName(PallasBackend::Role role) { return role == PallasBackend::Role::kJudge ? "judge" : "tracer"; }

// A new job folder of its own under `scratch`.
std::filesystem::path MakeJobDir(const std::filesystem::path& scratch, const std::string& role, std::string& error) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path dir =
      scratch / ("pallas-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" + role);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    error = "cannot create the job folder " + dir.string() + ": " + ec.message();
    return {};
  }
  return dir;
}

// Removes everything in `dir` (a symlink as a link: nothing outside is touched); true when it is
// empty afterwards.
bool EmptyFolder(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove_all(entry.path(), ec);
  return std::filesystem::is_empty(dir, ec) && !ec;
}

// The judge or the tracer (or its fork server) in a sandbox of its own, with `job_dir` as its
// only writable folder beside /tmp. The tracer gets no TPU device and runs jax on the CPU
// (tracing needs no device); the judge gets the chips of a TPU host.
SpawnOptions WorkerSpawn(const PallasSettings& settings, const std::filesystem::path& job_dir, PallasBackend::Role role,
                         bool fork_server, std::vector<std::string> command) {
  const bool judge = role == PallasBackend::Role::kJudge;
  // The venv sits next to the build, outside the sandbox's /usr view: bind it, the package and
  // the job folder at their own paths (so paths in the job mean the same on both sides).
  const std::filesystem::path venv = settings.python.parent_path().parent_path();
  SandboxSpec spec;
  spec.binds = {{venv.string(), venv.string(), false},
                {settings.package_dir.string(), settings.package_dir.string(), false},
                {job_dir.string(), job_dir.string(), true}};
  spec.cpu_info = true;
  // A fork server's jobs follow one another in one sandbox: only /tmp and the job folder may
  // hold anything, and those two are emptied between jobs.
  spec.read_only_root = fork_server;
  if (judge) spec.devices = TpuDevices();
  SpawnOptions spawn;
  spawn.argv = SandboxCommand(spec, command);
  // One BLAS thread: numpy's pool would otherwise be running when a fork server forks (the
  // judge computes with XLA, which has threads of its own, started in the forked process).
  spawn.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "HOME=/tmp", "TMPDIR=/tmp", "PYTHONPATH=" + settings.package_dir.string(),
               "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1", "TF_CPP_MIN_LOG_LEVEL=2", "OPENBLAS_NUM_THREADS=1"};
  if (!judge) spawn.env.push_back("JAX_PLATFORMS=cpu");
  if (fork_server) spawn.env.push_back("KERNELGYM_FORK_SERVER_SANDBOX=1");
  spawn.working_dir = job_dir.string();
  spawn.limits.address_space = std::size_t{32} << 30;  // XLA reserves address space generously
  spawn.limits.cpu_seconds = 3600;
  spawn.limits.open_files = 1024;
  spawn.limits.file_size = std::size_t{1} << 30;
  return spawn;
}

bool CheckPython(const PallasSettings& settings, std::string& error) {
  if (std::filesystem::exists(settings.python)) return true;
  error = "no Python for the pallas backend at " + settings.python.string() +
          " (scripts/pallas_venv.sh installs it; KERNELGYM_PALLAS_PYTHON points elsewhere)";
  return false;
}

// Under bubblewrap a process is bwrap's child: its death by a signal reaches us as bwrap's exit
// code 128 + signal.
int DeathSignal(const ChildProcess& child) {
  if (child.signal() != 0) return child.signal();
  if (child.exit_code() > 128 && child.exit_code() < 128 + 65 && ProbeSandbox().bwrap) return child.exit_code() - 128;
  return 0;
}

}  // namespace

// ---- the fork server ---------------------------------------------------------------------------

// A sandboxed Python that has imported jax (forkserver.py) and forks one process per job, one
// job at a time. Its job folder is every job's: the runner empties it between jobs.
class PallasForkServer {
 public:
  PallasForkServer(const PallasForkServer&) = delete;
  PallasForkServer& operator=(const PallasForkServer&) = delete;
  ~PallasForkServer() {
    Kill();
    if (process_.pid() > 0) process_.Wait(After(5));
    CloseFd(socket_);
    std::error_code ec;
    if (!job_dir_.empty()) std::filesystem::remove_all(job_dir_, ec);
  }

  static std::unique_ptr<PallasForkServer> Start(const PallasSettings& settings, const std::filesystem::path& scratch,
                                                 PallasBackend::Role role, std::string& error) {
    if (!CheckPython(settings, error)) return nullptr;
    std::unique_ptr<PallasForkServer> server(new PallasForkServer);
    server->role_ = RoleName(role);
    server->job_dir_ = MakeJobDir(scratch, server->role_, error);
    if (server->job_dir_.empty()) return nullptr;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      error = std::string("socketpair: ") + std::strerror(errno);
      return nullptr;
    }
    std::vector<std::string> command = {settings.python.string(), "-m", "kernelgym_pallas.forkserver", "--role",
                                        server->role_, "--server-fd", std::to_string(kControlFd)};
    // The tracer too: Pallas asks for the chip's facts while some kernels are traced.
    command.insert(command.end(), {"--target", settings.target});
    SpawnOptions spawn = WorkerSpawn(settings, server->job_dir_, role, /*fork_server=*/true, command);
    spawn.pass_fds = {{pair[1], kControlFd}};
    server->process_ = ChildProcess::Spawn(spawn);
    close(pair[1]);
    server->socket_ = pair[0];
    if (server->process_.pid() <= 0) {
      error = "the pallas " + server->role_ + "'s fork server did not start: " + server->process_.error();
      return nullptr;
    }
    return server;
  }

  // Hands the server one job's control socket, report pipe and stderr pipe; it forks the job's
  // process once it is ready (the descriptors wait in the socket until then).
  bool Fork(int control, int report, int stderr_write, std::string& error) {
    std::string line = judge::Encode(judge::ForkJob{3}) + "\n";
    iovec io{line.data(), line.size()};
    int fds[3] = {control, report, stderr_write};
    alignas(cmsghdr) char space[CMSG_SPACE(sizeof fds)] = {};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = space;
    message.msg_controllen = sizeof space;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(header), fds, sizeof fds);
    if (sendmsg(socket_, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(line.size())) return true;
    error = "the pallas " + role_ + "'s fork server is gone: " + std::strerror(errno);
    return false;
  }

  enum class End { kEnded, kTimeout, kServerGone };
  // The server's word that the job's process ended (how, and whether /tmp is empty again). Any
  // other word (a Fatal, a line that is not a message) means the server cannot be trusted with
  // another job: it is ended, and the job's process with it.
  End AwaitExit(Clock::time_point deadline, int& exit_code, int& signal, bool& clean) {
    for (;;) {
      if (const auto newline = buffer_.find('\n'); newline != std::string::npos) {
        std::string problem;
        const std::optional<judge::Message> message = judge::Decode(buffer_.substr(0, newline), problem);
        buffer_.erase(0, newline + 1);
        const auto* ended = message ? std::get_if<judge::JobEnded>(&*message) : nullptr;
        if (!ended) {
          Kill();
          return End::kServerGone;
        }
        exit_code = static_cast<int>(ended->exit_code);
        signal = static_cast<int>(ended->signal);
        clean = ended->clean;
        return End::kEnded;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return End::kTimeout;
      pollfd fd{socket_, POLLIN, 0};
      const int n = poll(&fd, 1, static_cast<int>(std::min<int64_t>(left, 200)));
      process_.DrainOutput();
      if (n <= 0) continue;
      char chunk[4096];
      const ssize_t got = recv(socket_, chunk, sizeof chunk, MSG_DONTWAIT);
      if (got > 0 && buffer_.size() < (std::size_t{1} << 20)) buffer_.append(chunk, static_cast<std::size_t>(got));
      else if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return End::kServerGone;
    }
  }

  // SIGKILL to the server's sandbox, and so to the job's process in it.
  void Kill() {
    if (process_.pid() > 0 && !process_.exited()) process_.Kill();
  }
  bool Alive() { return process_.pid() > 0 && !process_.Wait(Clock::now()); }
  // The server's own end, when it took the job's process with it.
  void AwaitGone(int& exit_code, int& signal) {
    process_.Wait(After(5));
    process_.DrainOutput();
    exit_code = process_.exit_code();
    signal = DeathSignal(process_);
  }
  const std::string& stderr_text() const { return process_.stderr_text(); }
  const std::filesystem::path& job_dir() const { return job_dir_; }
  pid_t pid() const { return process_.pid(); }

 private:
  PallasForkServer() = default;
  ChildProcess process_;
  int socket_ = -1;
  std::filesystem::path job_dir_;
  std::string role_;
  std::string buffer_;
};

// ---- a worker ----------------------------------------------------------------------------------

PallasWorker::~PallasWorker() {
  CloseFd(control_fd);  // a forked judge waiting for its next message reads the end and exits
  CloseFd(report_fd);
  if (server_) {
    if (!ended_) AwaitEnd(After(kEndGraceSeconds));
    if (!ended_) Kill();
    // The server may fork the next job's process as soon as it is back: that one has a watch of
    // its own, and this one must not count it.
    resident_.reset();
    // Only a server whose job ended, whose /tmp is empty and whose job folder we emptied forks
    // the next job.
    const bool reusable = ended_ && clean_ && server_->Alive() && EmptyFolder(server_->job_dir());
    pool_->Return(std::move(server_), reusable);
    CloseFd(stderr_fd_);
    return;
  }
  if (child_.pid() > 0 && !child_.exited()) child_.Kill();
  if (child_.pid() > 0) child_.Wait(After(5));
  std::error_code ec;
  if (!job_dir.empty()) std::filesystem::remove_all(job_dir, ec);
}

std::optional<PallasWorker::Read> PallasWorker::Buffered(judge::Message& message) {
  const auto newline = buffer.find('\n');
  if (newline == std::string::npos) return std::nullopt;
  const std::string line = buffer.substr(0, newline);
  buffer.erase(0, newline + 1);
  std::string problem;
  std::optional<judge::Message> decoded = judge::Decode(line, problem);
  if (!decoded) {
    garbled = problem + " (in: " + line.substr(0, 200) + ")";
    return Read::kGarbled;
  }
  message = std::move(*decoded);
  return Read::kEvent;
}

bool PallasWorker::Fill() {
  char chunk[65536];
  const ssize_t got = read(report_fd, chunk, sizeof chunk);
  if (got > 0) {
    buffer.append(chunk, static_cast<std::size_t>(got));
    if (buffer.size() > (std::size_t{64} << 20)) return false;  // no event is that long
    return true;
  }
  return got < 0 && (errno == EAGAIN || errno == EINTR);
}

PallasWorker::Read PallasWorker::Next(Clock::time_point deadline, judge::Message& message) {
  return NextOfWorkers({{this, deadline}}, message).second;
}

bool PallasWorker::Send(const judge::Message& message) {
  const std::string line = judge::Encode(message) + "\n";
  std::size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = ::send(control_fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

void PallasWorker::Kill() {
  if (server_) {
    server_->Kill();
    return;
  }
  if (child_.pid() > 0 && !child_.exited()) child_.Kill();
}

void PallasWorker::Finish(Clock::time_point deadline) {
  if (!server_) {
    Kill();
    AwaitEnd(After(5));
    return;
  }
  CloseFd(control_fd);
  if (!AwaitEnd(deadline)) {
    Kill();
    AwaitEnd(After(5));
  }
}

bool PallasWorker::AwaitEnd(Clock::time_point deadline) {
  if (ended_) return true;
  if (!server_) {
    if (!child_.Wait(deadline)) return false;
    ended_ = true;
    exit_code_ = child_.exit_code();
    signal_ = DeathSignal(child_);
    return true;
  }
  switch (server_->AwaitExit(deadline, exit_code_, signal_, clean_)) {
    case PallasForkServer::End::kEnded:
      ended_ = true;
      return true;
    case PallasForkServer::End::kServerGone:  // the job's process went with it (its pid namespace)
      server_->AwaitGone(exit_code_, signal_);
      ended_ = true;
      clean_ = false;
      return true;
    case PallasForkServer::End::kTimeout:
      return false;
  }
  return false;
}

void PallasWorker::DrainOutput() {
  if (!server_) {
    child_.DrainOutput();
    return;
  }
  if (stderr_fd_ >= 0 && !ReadAvailable(stderr_fd_, stderr_text_)) CloseFd(stderr_fd_);
}

int PallasWorker::stderr_fd() const { return server_ ? stderr_fd_ : child_.stderr_fd(); }

const std::string& PallasWorker::stderr_text() const {
  if (!server_) return pool_ ? stderr_text_ : child_.stderr_text();
  // Nothing from the job's process: what its server said (a start-up that failed) explains more.
  return stderr_text_.empty() ? server_->stderr_text() : stderr_text_;
}

pid_t PallasWorker::tree_pid() const { return server_ ? server_->pid() : child_.pid(); }

std::string PallasWorker::resident_verdict() const {
  if (!resident_exceeded()) return "";
  return "the " + role + "'s resident memory exceeded its limit of " + MemoryAmount(resident_->limit_bytes()) +
         " (its sandbox's processes held " + MemoryAmount(resident_->held_bytes()) + "; it was killed)";
}

int PallasWorker::signal() const { return signal_; }
int PallasWorker::exit_code() const { return exit_code_; }

std::pair<std::size_t, PallasWorker::Read> NextOfWorkers(
    const std::vector<std::pair<PallasWorker*, Clock::time_point>>& waiting, judge::Message& event) {
  for (;;) {
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      PallasWorker& w = *waiting[i].first;
      if (auto read = w.Buffered(event)) return {i, *read};
      if (w.closed) return {i, PallasWorker::Read::kClosed};
    }
    const auto now = Clock::now();
    Clock::time_point earliest = waiting.front().second;
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      if (waiting[i].second <= now) return {i, PallasWorker::Read::kTimeout};
      earliest = std::min(earliest, waiting[i].second);
    }
    std::vector<pollfd> fds;
    for (const auto& [worker, deadline] : waiting) {
      fds.push_back({worker->report_fd, POLLIN, 0});
      if (worker->stderr_fd() >= 0) fds.push_back({worker->stderr_fd(), POLLIN, 0});
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(earliest - now).count();
    const int n = poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(left, 1, 200)));
    if (n < 0 && errno != EINTR) {
      waiting.front().first->closed = true;
      continue;
    }
    for (const auto& [worker, deadline] : waiting) {
      worker->DrainOutput();
      for (const pollfd& fd : fds)
        if (fd.fd == worker->report_fd && (fd.revents & (POLLIN | POLLHUP | POLLERR)) && !worker->Fill())
          worker->closed = true;
    }
  }
}

// ---- the pool ----------------------------------------------------------------------------------

PallasWorkerPool::PallasWorkerPool(PallasSettings settings, std::filesystem::path scratch, PallasBackend::Role role,
                                   bool fork_ahead)
    : settings_(std::move(settings)), scratch_(std::move(scratch)), role_(role), fork_ahead_(fork_ahead) {
  // Jobs follow one another in a fork server's sandbox only where that sandbox is a pid
  // namespace with a read-only root; without bubblewrap every job gets a process of its own. On a
  // TPU host the judge is started per job too: whether importing Pallas's TPU module already
  // loads libtpu (whose threads a fork would not take along) has not been tried on one.
  forking_ = settings_.fork_server && ProbeSandbox().bwrap &&
             !(role_ == PallasBackend::Role::kJudge && !TpuDevices().empty());
  // A judge with a TPU times at the full shapes, drawing their inputs in host memory first.
  resident_limit_ = role_ == PallasBackend::Role::kJudge && !TpuDevices().empty() ? settings_.tpu_judge_resident_limit_bytes
                                                                                 : settings_.resident_limit_bytes;
}

PallasWorkerPool::~PallasWorkerPool() {
  std::unique_ptr<PallasWorker> spare;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;  // a server that comes back now is ended, not forked again
    spare = std::move(spare_);
  }
  spare.reset();  // outside the lock: a forked spare gives its server back (Return)
}

void PallasWorkerPool::Return(std::unique_ptr<PallasForkServer> server, bool reusable) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --lent_;
    if (reusable && !closing_ && !(fork_ahead_ && !spare_)) {
      idle_.push_back(std::move(server));
      return;
    }
    if (reusable && !closing_) ++lent_;  // lent again, to the next job's process, forked now
  }
  if (!reusable || closing_) {
    server.reset();  // kills it and removes its folder, outside the lock (it may wait for the exit)
    return;
  }
  // The next job's process forked now, while nobody waits for it: by the next evaluation it has
  // opened its target and said it is ready. It is a fresh fork of a server whose last job ended,
  // whose /tmp and job folder were emptied (that is what `reusable` says), and it holds nothing
  // until its job arrives.
  ForkSpare(std::move(server));
}

void PallasWorkerPool::ForkSpare(std::unique_ptr<PallasForkServer> server) {
  std::string error;
  std::unique_ptr<PallasWorker> worker = ForkFrom(std::move(server), error);
  if (!worker) return;  // the server went back (or was ended) with the failed worker
  worker->forked_ahead = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spare_ && !closing_) {
      spare_ = std::move(worker);
      return;
    }
  }
  worker.reset();  // outside the lock
}

std::unique_ptr<PallasWorker> PallasWorkerPool::Take(std::string& error) {
  if (!forking_) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (spare_ && !spare_->child_.Wait(Clock::now())) return std::move(spare_);
      spare_.reset();
    }
    auto worker = std::make_unique<PallasWorker>();
    worker->role = RoleName(role_);
    if (!CheckPython(settings_, error)) return nullptr;
    worker->job_dir = MakeJobDir(scratch_, worker->role, error);
    if (worker->job_dir.empty()) return nullptr;
    ChildChannels channels;
    if (!OpenChildChannels(channels, error)) return nullptr;
    const bool judge = role_ == PallasBackend::Role::kJudge;
    std::vector<std::string> command = {settings_.python.string(), "-m",
                                        judge ? "kernelgym_pallas.judge" : "kernelgym_pallas.tracer"};
    command.insert(command.end(), {"--target", settings_.target});
    command.insert(command.end(), {"--control-fd", std::to_string(kControlFd), "--report-fd", std::to_string(kReportFd)});
    SpawnOptions spawn = WorkerSpawn(settings_, worker->job_dir, role_, /*fork_server=*/false, command);
    spawn.pass_fds = {{channels.control[0], kControlFd}, {channels.report[1], kReportFd}};
    worker->child_ = ChildProcess::Spawn(spawn);
    close(channels.control[0]);
    close(channels.report[1]);
    worker->control_fd = channels.control[1];
    worker->report_fd = channels.report[0];
    fcntl(worker->report_fd, F_SETFL, O_NONBLOCK);
    if (worker->child_.pid() <= 0) {
      error = "the pallas " + worker->role + " did not start: " + worker->child_.error();
      return nullptr;
    }
    worker->resident_ = std::make_unique<ResidentLimit>(worker->child_.pid(), resident_limit_);
    return worker;
  }

  std::unique_ptr<PallasWorker> spare;
  std::unique_ptr<PallasForkServer> server;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    spare = std::move(spare_);
    if (spare && spare->server_->Alive()) return spare;  // its server is lent to it already
    while (!idle_.empty() && !server) {
      server = std::move(idle_.back());
      idle_.pop_back();
      if (!server->Alive()) server.reset();
    }
    ++lent_;
  }
  spare.reset();  // a spare whose server died: given back (and ended) outside the lock
  if (!server) server = PallasForkServer::Start(settings_, scratch_, role_, error);
  if (!server) {
    std::lock_guard<std::mutex> lock(mutex_);
    --lent_;
    return nullptr;
  }
  return ForkFrom(std::move(server), error);
}

std::unique_ptr<PallasWorker> PallasWorkerPool::ForkFrom(std::unique_ptr<PallasForkServer> server, std::string& error) {
  auto worker = std::make_unique<PallasWorker>();
  worker->role = RoleName(role_);
  worker->pool_ = this;
  worker->job_dir = server->job_dir();
  worker->server_ = std::move(server);
  ChildChannels channels;
  int stderr_pipe[2] = {-1, -1};
  if (!OpenChildChannels(channels, error) || pipe2(stderr_pipe, O_CLOEXEC) != 0) {
    if (error.empty()) error = std::string("pipe: ") + std::strerror(errno);
    for (int fd : {channels.control[0], channels.control[1], channels.report[0], channels.report[1]})
      if (fd >= 0) close(fd);
    worker->Kill();
    return nullptr;  // the worker's destructor returns the (killed) server
  }
  const bool forked = worker->server_->Fork(channels.control[0], channels.report[1], stderr_pipe[1], error);
  close(channels.control[0]);
  close(channels.report[1]);
  close(stderr_pipe[1]);
  worker->control_fd = channels.control[1];
  worker->report_fd = channels.report[0];
  worker->stderr_fd_ = stderr_pipe[0];
  fcntl(worker->report_fd, F_SETFL, O_NONBLOCK);
  fcntl(worker->stderr_fd_, F_SETFL, O_NONBLOCK);
  if (!forked) {
    worker->Kill();
    return nullptr;
  }
  // The server's whole sandbox: the server itself (waiting while its one job runs) and the job.
  worker->resident_ = std::make_unique<ResidentLimit>(worker->server_->pid(), resident_limit_);
  return worker;
}

void PallasWorkerPool::Prestart() {
  std::string error;
  if (forking_ && fork_ahead_ && role_ == PallasBackend::Role::kJudge) {
    ForkSpareFromAnotherServer();
    return;
  }
  if (!forking_) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (spare_) return;
    }
    std::unique_ptr<PallasWorker> worker = Take(error);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!spare_) spare_ = std::move(worker);
    return;
  }
  {
    // Servers come back after their job: one is started ahead only when there is none at all.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty() || lent_ > 0) return;
  }
  std::unique_ptr<PallasForkServer> server = PallasForkServer::Start(settings_, scratch_, role_, error);
  if (!server) return;
  std::lock_guard<std::mutex> lock(mutex_);
  idle_.push_back(std::move(server));
}

void PallasWorkerPool::ForkSpareFromAnotherServer() {
  std::unique_ptr<PallasForkServer> server;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (spare_ || closing_) return;
    while (!idle_.empty() && !server) {
      server = std::move(idle_.back());
      idle_.pop_back();
      if (!server->Alive()) server.reset();
    }
    ++lent_;
  }
  std::string error;
  if (!server) server = PallasForkServer::Start(settings_, scratch_, role_, error);  // its start is not awaited
  if (!server) {
    std::lock_guard<std::mutex> lock(mutex_);
    --lent_;
    return;
  }
  ForkSpare(std::move(server));
}

std::vector<std::string> TpuDevices() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec))
    if (entry.path().filename().string().rfind("accel", 0) == 0) out.push_back(entry.path().string());
  if (std::filesystem::is_directory("/dev/vfio", ec)) out.push_back("/dev/vfio");
  return out;
}

}  // namespace kernelgym
