#include "tpu_runner/cpu/harness_zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tpu_runner/cpu/zygote_protocol.h"
#include "tpu_runner/machine.h"
#include "tpu_runner/sandbox.h"

namespace kernelgym {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// How long the zygote may take to load libtorch (~0.5 s quiet; seconds on a loaded machine).
constexpr double kZygoteStartSeconds = 120;

int MillisecondsUntil(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1000));
}

void MakeReadable(const fs::path& dir, std::error_code& ec) {
  fs::create_directories(dir, ec);
  if (ec) return;
  fs::permissions(dir,
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                      fs::perms::others_exec,
                  ec);
}

// A judge the zygote forked: its end comes back on `link` from the keeper that is its parent.
class ForkedHarness final : public HarnessChild {
 public:
  ForkedHarness(int link, int out, int err) : link_(link), out_(out), err_(err) {
    fcntl(out_, F_SETFL, O_NONBLOCK);
    fcntl(err_, F_SETFL, O_NONBLOCK);
  }
  ~ForkedHarness() override {
    Kill();  // closing the link would do it too: the keeper kills the judge when the runner goes
    for (int fd : {link_, out_, err_}) close(fd);
  }
  int stdout_fd() const override { return out_; }
  int stderr_fd() const override { return err_; }
  void DrainOutput() override {
    ReadAvailable(out_, stdout_);
    ReadAvailable(err_, stderr_);
  }
  void Kill() override {
    if (!ended_) send(link_, "k", 1, MSG_NOSIGNAL);
  }
  bool Wait(Clock::time_point deadline) override {
    while (!ended_) {
      pollfd p{link_, POLLIN, 0};
      const int n = poll(&p, 1, MillisecondsUntil(deadline));
      if (n < 0 && errno != EINTR) break;
      if (n > 0) {
        int status = 0;
        const ssize_t got = recv(link_, &status, sizeof(status), 0);
        if (got < 0 && errno == EINTR) continue;
        ended_ = true;
        if (got == static_cast<ssize_t>(sizeof(status)) && WIFEXITED(status)) {
          exit_code_ = WEXITSTATUS(status);
        } else if (got == static_cast<ssize_t>(sizeof(status)) && WIFSIGNALED(status)) {
          signal_ = WTERMSIG(status);
        } else {
          signal_ = SIGKILL;  // the keeper is gone without a word: its zygote's sandbox ended
        }
        DrainOutput();
        break;
      }
      if (Clock::now() >= deadline) break;
    }
    return ended_;
  }
  int exit_code() const override { return exit_code_; }
  int signal() const override { return signal_; }
  const std::string& stderr_text() const override { return stderr_; }

 private:
  int link_, out_, err_;
  bool ended_ = false;
  int exit_code_ = -1, signal_ = 0;
  std::string stdout_, stderr_;
};

}  // namespace

HarnessZygote::HarnessZygote(fs::path tools_dir, fs::path scratch_root, int threads)
    : tools_dir_(std::move(tools_dir)), scratch_root_(std::move(scratch_root)), threads_(threads) {}

HarnessZygote::~HarnessZygote() {
  Stop();
  std::error_code ec;
  if (!slots_dir_.empty()) fs::remove_all(slots_dir_, ec);
}

bool HarnessZygote::Running() { return process_.pid() > 0 && !process_.Wait(Clock::now()); }

void HarnessZygote::Stop() {
  if (request_fd_ >= 0) close(request_fd_);  // the zygote exits when its request socket closes
  request_fd_ = -1;
  if (process_.pid() > 0) {
    process_.Kill();
    process_.Wait(Clock::time_point::max());
  }
  process_ = ChildProcess();
}

bool HarnessZygote::EnsureStarted(std::string& error) {
  if (!broken_.empty()) {
    error = broken_;
    return false;
  }
  if (Running()) return true;
  Stop();
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  if (slots_dir_.empty()) {
    slots_dir_ = scratch_root_ / ("zygote-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    MakeReadable(slots_dir_, ec);
    if (ec) {
      error = "cannot create the zygote's slots " + slots_dir_.string() + ": " + ec.message();
      return false;
    }
  }
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) {
    error = std::string("socketpair: ") + std::strerror(errno);
    return false;
  }
  auto inside = [&](const std::string& name) { return HarnessToolPath(tools_dir_, name); };
  SpawnOptions spawn = HarnessSpawnOptions(
      tools_dir_, slots_dir_, ProbeSandbox().bwrap ? "/opt/kernelgym/slots" : slots_dir_.string(), threads_,
      {inside("kernelgym-reference"), "--zygote", "--harness", inside("kernelgym-harness"), "--reference",
       inside("kernelgym-reference"), "--executor", inside("kernelgym-executor")});
  // Off the timing CPU: loading libtorch must not disturb another runner's timing window. Each
  // judge moves to its evaluation's CPUs.
  spawn.cpus = NonTimingCpus(1);
  spawn.pass_fds = {{sockets[1], kZygoteRequestFd}};
  process_ = ChildProcess::Spawn(spawn);
  close(sockets[1]);
  request_fd_ = sockets[0];
  ++starts_;
  if (process_.pid() <= 0) {
    broken_ = error = "the zygote did not start: " + process_.error();
    Stop();
    return false;
  }
  // Ready once it writes its byte (libtorch loaded, one thread: zygote.cc).
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kZygoteStartSeconds));
  while (process_.stdout_text().find('z') == std::string::npos) {
    if (process_.Wait(Clock::now()) || Clock::now() > deadline) {
      process_.DrainOutput();
      const std::string why = process_.exited() ? (process_.signal() ? "killed by " + SignalName(process_.signal())
                                                                     : "exit " + std::to_string(process_.exit_code()))
                                                : "no word in " + std::to_string(static_cast<int>(kZygoteStartSeconds)) + " s";
      broken_ = error = "the reference zygote did not start (" + why + "): " + HeadLines(process_.stderr_text(), 3);
      Stop();
      return false;
    }
    pollfd p{process_.stdout_fd(), POLLIN, 0};
    poll(&p, 1, 100);
    process_.DrainOutput();
  }
  return true;
}

bool HarnessZygote::Send(int link, int control, int report, int out, int err, const std::vector<int>& cpus) {
  const std::string payload = nlohmann::json{{"cpus", cpus}}.dump();
  const int fds[kZygoteFdsPerRequest] = {link, control, report, out, err};
  alignas(cmsghdr) char buffer[CMSG_SPACE(sizeof(fds))] = {};
  iovec iov{const_cast<char*>(payload.data()), payload.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = buffer;
  msg.msg_controllen = sizeof(buffer);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  ssize_t n;
  do n = sendmsg(request_fd_, &msg, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(payload.size())) return false;
  // Taken once the zygote says it forked the keeper. Its socket outlives a killed zygote for a
  // moment (the sandbox's own processes hold it until they see the zygote end), so its death
  // shows as the sandbox's exit, not as an error here.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kZygoteStartSeconds));
  while (Clock::now() < deadline) {
    pollfd p{request_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      char ack = 0;
      return recv(request_fd_, &ack, 1, MSG_DONTWAIT) == 1 && ack == 'f';
    }
    if (process_.Wait(Clock::now())) return false;
  }
  return false;
}

std::unique_ptr<HarnessProcess> HarnessZygote::Fork(const std::vector<int>& cpus, std::string& error) {
  auto process = std::make_unique<HarnessProcess>();
  process->threads = threads_;
  const std::string slot = "s" + std::to_string(next_slot_++);
  // Twice at most: a zygote that died since the last evaluation is found dead here (or by the
  // send failing) and started again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!EnsureStarted(error)) return nullptr;
    process->slot_dir = slots_dir_ / slot;
    process->slot_in_sandbox = (ProbeSandbox().bwrap ? std::string("/opt/kernelgym/slots") : slots_dir_.string()) + "/" + slot;
    std::error_code ec;
    MakeReadable(process->slot_dir, ec);
    if (ec) {
      error = "cannot create the harness slot " + process->slot_dir.string() + ": " + ec.message();
      return nullptr;
    }
    ChildChannels channels;
    if (!OpenChildChannels(channels, error)) return nullptr;
    int out[2], err[2], link[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, link) != 0) {
      error = std::string("harness channels: ") + std::strerror(errno);
      for (int fd : {channels.control[0], channels.control[1], channels.report[0], channels.report[1]}) close(fd);
      return nullptr;
    }
    const bool sent = Send(link[1], channels.control[0], channels.report[1], out[1], err[1], cpus);
    // The judge's ends now live in the zygote (or nowhere, when it is gone): the runner keeps its own.
    for (int fd : {link[1], channels.control[0], channels.report[1], out[1], err[1]}) close(fd);
    if (!sent) {
      for (int fd : {link[0], channels.control[1], channels.report[0], out[0], err[0]}) close(fd);
      error = "the reference zygote took no request (it ended)";
      Stop();  // a keeper it may have forked ends with its sandbox
      continue;
    }
    process->control_fd = channels.control[1];
    process->report_fd = channels.report[0];
    fcntl(process->report_fd, F_SETFL, O_NONBLOCK);
    process->child = std::make_unique<ForkedHarness>(link[0], out[0], err[0]);
    return process;
  }
  return nullptr;
}

}  // namespace kernelgym
