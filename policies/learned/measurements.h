// Measured knob settings: what the learned side knows about (task, setting) -> evaluation.
//
// MeasurementStore is a cache with an append-only JSON Lines file behind it. A setting is
// evaluated for real once; training iterations, held-out evaluations and later runs that open the
// same file re-use that evaluation (so PPO is deterministic given a seed and the same
// measurements, and two policies compared on a task are compared on the same numbers). Its rows
// have the columns of `kernelgym dataset export --format transitions` that a knob dataset needs
// (task, backend, action_kind, action, status, speedup, reward), so a `kernelgym collect` export
// is read by the same loader (LoadKnobDataset).
//
// Evaluator measures what the store lacks through a kernelgym server: envs made with the
// history-free `log_speedup` reward (so a cached reward is exactly what the env would answer
// again), up to `envs_per_task` envs per task stepping at once through the async client.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "env/client/client.h"
#include "policies/common/paid_speedup.h"
#include "policies/learned/features.h"
#include "policies/learned/knob_space.h"

namespace kernelgym::learned {

inline constexpr const char* kStarterKey = "starter";  // the reset's evaluation of the starter

struct Measurement {
  std::string task, backend = "cpu";
  std::string key;  // KnobSpace::Key of the setting, or kStarterKey
  KnobMap knobs;    // empty for the starter
  std::string status;
  // Against the reference: the speedup the env paid (policies/common/paid_speedup.h), measured or,
  // off a TPU, the pallas judge's trusted estimate; 0 unless correct and paid.
  double speedup = 0;
  std::string speedup_kind;  // "measured", "estimated"; "" when nothing was paid
  double reward = 0;   // the env's log_speedup reward (0 for the starter)
  NamedFeatures features;
  double eval_seconds = 0;
  bool ok() const { return status == "ok" && speedup > 0; }
};

nlohmann::json MeasurementToJson(const Measurement& m);
std::optional<Measurement> MeasurementFromJson(const nlohmann::json& row, std::string& error);

class MeasurementStore {
 public:
  // Reads `file` when it exists (a torn last line is skipped) and appends new measurements to it;
  // an empty path keeps them in memory only.
  static std::unique_ptr<MeasurementStore> Open(const std::filesystem::path& file, std::string& error);

  const Measurement* Find(const std::string& task, const std::string& key) const;
  // Keeps `m` (first measurement of a key wins) and appends it to the file. false with `error`
  // when the file cannot be written.
  bool Add(const Measurement& m, std::string& error);
  std::vector<const Measurement*> ForTask(const std::string& task) const;
  std::size_t size() const;
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::ofstream out_;
  std::map<std::string, std::map<std::string, Measurement>> by_task_;
};

// Knob evaluations from files: measurement files, or `kernelgym collect` / `dataset export
// --format transitions` output (rows with action_kind "knobs"; others are skipped). Rows of a
// setting seen twice keep the first.
struct KnobDataset {
  std::map<std::string, std::vector<Measurement>> by_task;
  std::size_t rows = 0, skipped = 0;
};
std::optional<KnobDataset> LoadKnobDataset(const std::vector<std::filesystem::path>& files, std::string& error);

struct EvaluatorOptions {
  std::string backend = "cpu";
  int envs_per_task = 2;  // envs of one task stepping at once
  bool record = false;    // env.make's record: the server keeps every step in its trajectory store
};

// Evaluates through a server; everything it measures goes to the store. Not thread-safe: one
// thread drives it (the concurrency is in the envs, stepped through one async client).
class Evaluator {
 public:
  // Reads hello (the feature names) once. Throws the client's errors.
  Evaluator(client::Client& client, MeasurementStore& store, EvaluatorOptions options);
  ~Evaluator();  // closes its envs

  const std::vector<std::string>& feature_names() const { return feature_names_; }
  // tasks.get as a knob policy on this backend sees it (TaskForBackend), cached.
  const protocol::TaskInfo& Task(const std::string& task);
  // The starter's evaluation (the env's reset observation), from the store or measured.
  const Measurement& Starter(const std::string& task);

  struct Request {
    std::string task;
    KnobMap knobs;
  };
  // One measurement per request, in request order. Settings the store lacks are evaluated once
  // each, concurrently. Environment failures (a lost runner, an internal error) are returned but
  // not stored, so a later request measures again. Throws on a transport or protocol failure.
  std::vector<Measurement> Measure(const std::vector<Request>& requests);

  std::size_t evaluations() const { return evaluations_; }  // real env steps so far
  std::size_t reused() const { return reused_; }            // requests answered by the store

 private:
  struct Env {
    std::string id;
    bool needs_reset = false;
  };
  Env& MakeEnv(const std::string& task);
  Measurement FromObservation(const std::string& task, const std::string& key, const KnobMap& knobs,
                              const protocol::Observation& observation, double reward, const nlohmann::json& info);

  client::Client& client_;
  MeasurementStore& store_;
  EvaluatorOptions options_;
  std::vector<std::string> feature_names_;
  std::map<std::string, protocol::TaskInfo> tasks_;
  std::map<std::string, std::vector<Env>> envs_;
  std::size_t evaluations_ = 0, reused_ = 0;
};

}  // namespace kernelgym::learned
