// The trajectory store against real process deaths and real write errors:
//   - a child process records as fast as it can and reports every durable token through a pipe;
//     the parent SIGKILLs it at a random moment. Every token the child reported must be readable
//     afterwards, and nothing in the store may be corrupt (a torn last line is allowed).
//   - a file-size limit (RLIMIT_FSIZE) makes a write fail half-way: the token comes back failed,
//     the recorder is unhealthy, the half-written line is cut off, and the next record succeeds.
//   - an exported transitions file reads into pandas (skipped when pandas is not installed).
#include "tests/common/temp_dir.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/trajectory/dataset_command.h"
#include "datasets/trajectory/reader.h"
#include "datasets/trajectory/recorder.h"
#include "datasets/trajectory/segments.h"

namespace kernelgym {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::TempDir;

// Kills and reaps a child if the test leaves early.
class ChildGuard {
 public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ~ChildGuard() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  // Waits for the child; returns its wait status.
  int Wait() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

bool WriteFully(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// A record whose content can be checked from its token: `pad` is `size` copies of one letter.
std::string CrashRecord(uint64_t token, std::size_t size) {
  return json{{"kind", "transition"},
              {"token", token},
              {"size", size},
              {"pad", std::string(size, static_cast<char>('a' + token % 26))}}
      .dump();
}

// The child: records forever (until SIGKILL), keeping up to 64 records in flight, and writes
// each durable token to `pipe_fd` only after TakeDurable returned it — what the server does
// before it replies.
[[noreturn]] void RecordUntilKilled(const fs::path& dir, int pipe_fd, uint64_t first_token, uint64_t seed) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  RecorderOptions options;
  options.segment_max_bytes = 64 << 10;  // several rotations per run
  options.max_batch = 16;
  std::string error;
  std::unique_ptr<TrajectoryRecorder> recorder = TrajectoryRecorder::Open(dir, options, error);
  if (!recorder) _exit(3);
  std::mt19937_64 rng(seed);
  uint64_t next = first_token;
  std::size_t in_flight = 0;
  for (;;) {
    while (in_flight < 64) {
      recorder->Submit(next, CrashRecord(next, rng() % 3000));
      ++next;
      ++in_flight;
    }
    pollfd p{recorder->notify_fd(), POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) _exit(4);
    for (uint64_t token : recorder->TakeDurable()) {
      if (!WriteFully(pipe_fd, &token, sizeof(token))) _exit(5);
      --in_flight;
    }
    if (!recorder->TakeFailed().empty()) _exit(6);
  }
}

TEST(TrajectoryCrashTest, EveryTokenReportedDurableSurvivesSigkill) {
  TempDir store;
  std::random_device rd;
  const uint64_t seed = rd();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::set<uint64_t> reported;
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    int fds[2];
    ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
    const uint64_t first_token = static_cast<uint64_t>(round) * 1000000000ull;
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      RecordUntilKilled(store.path(), fds[1], first_token, rng());
    }
    ChildGuard child(pid);
    close(fds[1]);
    // Round 0 kills before the child has done anything; the others after a random number of
    // durable tokens, while it keeps writing.
    const std::size_t kill_after = round == 0 ? 0 : 1 + rng() % 4000;
    std::vector<uint64_t> tokens;
    std::string bytes;
    char buf[4096];
    bool killed = false;
    for (;;) {
      if (!killed && tokens.size() >= kill_after) {
        ASSERT_EQ(kill(pid, SIGKILL), 0);
        killed = true;
      }
      pollfd p{fds[0], POLLIN, 0};
      const int ready = poll(&p, 1, 60000);  // a failure detector, not synchronization
      if (ready < 0 && errno == EINTR) continue;
      ASSERT_EQ(ready, 1) << "the child reported nothing for 60 s (" << tokens.size() << " tokens so far)";
      const ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      ASSERT_GE(n, 0) << std::strerror(errno);
      if (n == 0) break;  // the child is gone and the pipe drained
      bytes.append(buf, static_cast<std::size_t>(n));
      while (bytes.size() >= sizeof(uint64_t)) {
        uint64_t token;
        std::memcpy(&token, bytes.data(), sizeof(token));
        bytes.erase(0, sizeof(token));
        tokens.push_back(token);
      }
    }
    close(fds[0]);
    const int status = child.Wait();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the child ended on its own (exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ")";
    EXPECT_TRUE(bytes.empty());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      ASSERT_EQ(tokens[i], first_token + i) << "durable tokens out of submit order";
      reported.insert(tokens[i]);
    }

    // Read the store back: every reported token is there with intact content.
    TrajectoryReader reader(store.path());
    ASSERT_TRUE(reader.ok()) << reader.error();
    std::set<uint64_t> stored;
    json record;
    while (reader.Next(record)) {
      const uint64_t token = record["token"].get<uint64_t>();
      const std::size_t size = record["size"].get<std::size_t>();
      ASSERT_EQ(record["pad"].get<std::string>(), std::string(size, static_cast<char>('a' + token % 26)))
          << reader.segment() << ":" << reader.line();
      EXPECT_TRUE(stored.insert(token).second) << "token " << token << " stored twice";
    }
    const ReaderStats& stats = reader.stats();
    for (const ReadProblem& p : stats.problems) EXPECT_TRUE(p.torn) << p.Describe();
    EXPECT_EQ(stats.corrupt, 0u);
    EXPECT_EQ(stats.unreadable, 0u);
    EXPECT_LE(stats.torn, static_cast<uint64_t>(round + 1)) << "at most one torn line per crash";
    std::size_t missing = 0;
    for (uint64_t token : reported) missing += stored.count(token) == 0;
    EXPECT_EQ(missing, 0u) << "of " << reported.size() << " tokens reported durable (round " << round << ")";
  }
  EXPECT_GT(reported.size(), 0u);

  // After the crashes a recorder starts after the highest segment and the store stays readable.
  std::string error;
  std::vector<Segment> before = ListSegments(store.path(), error);
  ASSERT_FALSE(before.empty());
  {
    auto recorder = TrajectoryRecorder::Open(store.path(), {}, error);
    ASSERT_NE(recorder, nullptr) << error;
    recorder->Submit(7, CrashRecord(7, 10));
    recorder->Close();
    EXPECT_EQ(recorder->TakeDurable(), (std::vector<uint64_t>{7}));
  }
  std::vector<Segment> after = ListSegments(store.path(), error);
  ASSERT_EQ(after.size(), before.size() + 1);
  EXPECT_EQ(after.back().number, before.back().number + 1);
}

// A write that fails half-way (here: the file-size limit, EFBIG; in production ENOSPC or EIO).
TEST(TrajectoryCrashTest, AFailedWriteIsReportedCutOffAndRecoveredFrom) {
  TempDir store;
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  const pid_t pid = fork();  // the limit is process-wide: keep it out of the test process
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
    rlimit limit;
    getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = 1000;
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
    RecorderOptions options;
    options.max_batch = 1;
    std::string error;
    auto recorder = TrajectoryRecorder::Open(store.path(), options, error);
    if (!recorder) _exit(4);
    json report = {{"durable", json::array()}, {"failed", json::array()}, {"healthy", json::array()}};
    for (uint64_t token = 1; token <= 5; ++token) {
      std::size_t pad = 0;
      while (CrashRecord(token, pad).size() + 1 < 300) ++pad;  // 300 bytes a line, newline included
      if (CrashRecord(token, pad).size() + 1 != 300) _exit(7);
      recorder->Submit(token, CrashRecord(token, pad));
      std::size_t done = 0;
      while (done == 0) {
        pollfd p{recorder->notify_fd(), POLLIN, 0};
        if (poll(&p, 1, 20000) != 1) _exit(5);
        for (uint64_t t : recorder->TakeDurable()) report["durable"].push_back(t), ++done;
        for (const FailedRecord& f : recorder->TakeFailed()) report["failed"].push_back({f.token, f.error}), ++done;
      }
      report["healthy"].push_back(recorder->healthy());
    }
    report["last_error"] = recorder->stats().last_error;
    report["failed_count"] = recorder->stats().failed;
    recorder->Close();
    const std::string text = report.dump();
    _exit(WriteFully(fds[1], text.data(), text.size()) ? 0 : 6);
  }
  ChildGuard child(pid);
  close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0);
    text.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  const int status = child.Wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  const json report = json::parse(text);

  // 3 lines of 300 bytes fit under 1000; the 4th is cut at byte 1000 and fails; the 5th goes
  // to a new segment.
  EXPECT_EQ(report["durable"], json({1, 2, 3, 5}));
  ASSERT_EQ(report["failed"].size(), 1u);
  EXPECT_EQ(report["failed"][0][0], 4);
  const std::string error = report["failed"][0][1];
  EXPECT_NE(error.find("File too large"), std::string::npos) << error;
  EXPECT_NE(error.find("segment-000001.jsonl"), std::string::npos) << error;
  EXPECT_EQ(report["healthy"], json({true, true, true, false, true}));
  EXPECT_EQ(report["last_error"], error);
  EXPECT_EQ(report["failed_count"], 1);

  EXPECT_EQ(fs::file_size(store.path() / "segment-000001.jsonl"), 900u) << "the partial line was not cut off";
  TrajectoryReader reader(store.path());
  std::vector<uint64_t> tokens;
  json record;
  while (reader.Next(record)) tokens.push_back(record["token"].get<uint64_t>());
  EXPECT_EQ(tokens, (std::vector<uint64_t>{1, 2, 3, 5}));
  EXPECT_EQ(reader.stats().torn + reader.stats().corrupt, 0u);
}

// Runs `command` through the shell and returns its standard output; `exit_code` gets the status.
std::string Capture(const std::string& command, int& exit_code) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    exit_code = -1;
    return out;
  }
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  exit_code = pclose(pipe);
  return out;
}

TEST(TrajectoryPandasTest, TransitionsExportReadsIntoADataFrame) {
  int rc = 0;
  Capture("python3 -c 'import pandas' 2>/dev/null", rc);
  if (rc != 0) GTEST_SKIP() << "python3 with pandas is not installed";

  TempDir dir;
  {
    std::string error;
    auto recorder = TrajectoryRecorder::Open(dir.path() / "store", {}, error);
    ASSERT_NE(recorder, nullptr) << error;
    const json reset = {{"kind", "reset"}, {"episode", "e"}, {"task", "cpu/t"},
                        {"seed", 12345},   {"step", 0},      {"observation", {{"status", "ok"}, {"speedup", 1.0}}}};
    recorder->Submit(0, reset.dump());
    for (int step = 1; step <= 5; ++step) {
      json t = reset;
      t["kind"] = "transition";
      t["step"] = step;
      t["action"] = step % 2 ? json{{"kind", "submit"}} : json{{"kind", "knobs"}, {"values", {{"tile", step}}}};
      t["prompt"] = "line one\nline \"two\"";
      t["reward"] = step * 0.5;
      t["terminated"] = false;
      t["truncated"] = false;
      recorder->Submit(step, t.dump());
    }
    recorder->Close();
    ASSERT_EQ(recorder->TakeDurable().size(), 6u);
  }
  std::ostringstream log;
  const fs::path out = dir.path() / "transitions.jsonl";
  ASSERT_EQ(RunDatasetExport(dir.path() / "store", "transitions", out, log), 0) << log.str();

  const std::string script =
      "import pandas as pd; df = pd.read_json('" + out.string() +
      "', lines=True); "
      "print(len(df)); print(','.join(df.columns)); print(df['reward'].sum()); print(df['step'].tolist())";
  const std::string output = Capture("python3 -c \"" + script + "\"", rc);
  ASSERT_EQ(rc, 0) << output;
  EXPECT_EQ(output,
            "5\n"
            "env,episode,task,backend,seed,step,action_kind,action,status,speedup,best_speedup,reward,terminated,"
            "truncated,reused,eval_seconds,prompt,source\n"
            "7.5\n"
            "[1, 2, 3, 4, 5]\n");
}

}  // namespace
}  // namespace kernelgym
