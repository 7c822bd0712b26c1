// The runner host (`kernelgym runner`): one process that connects to a server's runner socket,
// says which backends and hardware it has, evaluates the jobs it is sent and answers with their
// results. It is generic: backends come from BackendRegistry, tasks from the runner's own suites.
// The runner protocol (env/protocol/runner_messages.h) is what it speaks.
//
// Threads and ownership: the thread that calls RunRunnerHost owns the DEALER socket to the server
// (and everything else the host does on the network); `slots` worker threads each own their
// backends and evaluate one job at a time, handing results back over an inproc socket. So
// heartbeats keep flowing while a job is evaluated.
//
// Connection life: hello on connect; `reregister` -> hello again; nothing heard from the server
// (no welcome, ack, job...) for `server_silence_s` -> close the socket, open a new one, hello again
// (that is how a runner survives a server restart). Heartbeats go out every interval, busy or
// idle, so that a quiet server is noticed; the server's welcome sets the interval.
#pragma once

#include <atomic>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "env/security/keys.h"
#include "tpu_runner/backend.h"

namespace kernelgym {

struct RunnerHostOptions {
  std::string endpoint;                      // the server's runner socket, e.g. tcp://10.0.0.2:5556
  std::vector<std::string> backends{"cpu"};  // announced in hello; each must be registered
  std::string runner_id;                     // empty: DefaultRunnerId()
  double heartbeat_interval_s = 0.5;         // until the server's welcome says otherwise
  double server_silence_s = 5;               // heard nothing for this long: reconnect, hello again
  std::filesystem::path suites_root;         // tasks are loaded from here (empty: DefaultSuitesRoot())
  BackendConfig backend_config;
  int slots = 1;  // jobs evaluated at once (one worker thread each)
  // For liveness probes (`kernelgym health --file`): when set, rewritten (write + rename, at most
  // once a second) whenever the runner hears from its server, so its mtime says when that was.
  // Holds {runner_id, endpoint, busy, heard_unix_s}. Empty: none.
  std::filesystem::path health_file;
  // CURVE (docs/security.md): the server's public key and this runner's key pair; unset: plaintext.
  std::optional<security::CurveClientKeys> curve;
};

// Runs until `stop` becomes true (a signal handler may set it), then stops taking jobs, finishes
// the ones in progress, sends their results and returns 0. Jobs still queued (never started) are
// dropped: the server re-queues a lost runner's jobs. Returns 2 when it cannot start (no endpoint,
// an unknown backend, slots < 1) and 1 when the transport fails. Never throws.
int RunRunnerHost(const RunnerHostOptions& options, const std::atomic<bool>& stop);

// What hello says about this machine: host, cpu_model, cores, machine (MachineFingerprint()),
// kernel, compiler (first line of `g++ --version`), and the measured peaks (peak_gflops,
// peak_gbps, dram_gbps) when `cache_dir` already holds them (they are never measured here).
std::map<std::string, std::string> HostFingerprint(const std::filesystem::path& cache_dir);

// host:pid:random (8 hex digits).
std::string DefaultRunnerId();

}  // namespace kernelgym
