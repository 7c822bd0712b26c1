#include "policies/learned/measurements.h"

#include <cmath>
#include <deque>
#include <set>
#include <stdexcept>

namespace kernelgym::learned {
namespace {

using json = nlohmann::json;

// The key of a knob map as given (a valid setting's key equals KnobSpace::Key: both list the
// knobs in name order).
std::string KnobsKey(const KnobMap& knobs) {
  std::string key;
  for (const auto& [name, value] : knobs) key += (key.empty() ? "" : ",") + name + "=" + protocol::KnobValueText(value);
  return key;
}

json KnobsToJson(const KnobMap& knobs) {
  json out = json::object();
  for (const auto& [name, value] : knobs) out[name] = protocol::KnobValueToJson(value);
  return out;
}

// An evaluation the environment, not the kernel, failed (a lost runner, a server bug): not the
// setting's property, so it is never cached.
bool IsEnvironmentFailure(const std::string& status) { return status == "internal_error"; }

}  // namespace

json MeasurementToJson(const Measurement& m) {
  json row = {{"task", m.task},   {"backend", m.backend}, {"key", m.key},           {"status", m.status},
              {"speedup", m.speedup}, {"reward", m.reward}, {"eval_seconds", m.eval_seconds}};
  if (!m.speedup_kind.empty()) row["speedup_kind"] = m.speedup_kind;
  if (m.key == kStarterKey) {
    row["action_kind"] = "reset";
  } else {
    row["action_kind"] = "knobs";
    row["action"] = json{{"kind", "knobs"}, {"values", KnobsToJson(m.knobs)}}.dump();
  }
  row["features"] = m.features;
  return row;
}

std::optional<Measurement> MeasurementFromJson(const json& row, std::string& error) {
  if (!row.is_object() || !row.contains("task") || !row["task"].is_string()) {
    error = "a row without a 'task' string";
    return std::nullopt;
  }
  Measurement m;
  m.task = row["task"].get<std::string>();
  m.backend = row.value("backend", "cpu");
  m.status = row.contains("status") && row["status"].is_string() ? row["status"].get<std::string>() : "";
  m.speedup = row.contains("speedup") && row["speedup"].is_number() ? row["speedup"].get<double>() : 0.0;
  m.reward = row.contains("reward") && row["reward"].is_number() ? row["reward"].get<double>() : 0.0;
  m.speedup_kind = row.contains("speedup_kind") && row["speedup_kind"].is_string() ? row["speedup_kind"].get<std::string>() : "";
  m.eval_seconds = row.contains("eval_seconds") && row["eval_seconds"].is_number() ? row["eval_seconds"].get<double>() : 0.0;
  if (!std::isfinite(m.speedup) || m.speedup < 0) m.speedup = 0;
  if (row.contains("features") && row["features"].is_object())
    for (const auto& [name, value] : row["features"].items())
      if (value.is_number()) m.features[name] = value.get<double>();
  const std::string kind = row.value("action_kind", "");
  if (kind == "reset") {
    m.key = kStarterKey;
    return m;
  }
  if (kind != "knobs" || !row.contains("action")) {
    error = "not a knobs action";
    return std::nullopt;
  }
  // `action` is a JSON string in exports (a uniform pandas column); accept a map too.
  json action = row["action"];
  if (action.is_string()) action = json::parse(action.get<std::string>(), nullptr, /*allow_exceptions=*/false);
  if (!action.is_object() || !action.contains("values") || !action["values"].is_object()) {
    error = "a knobs action without a 'values' map";
    return std::nullopt;
  }
  for (const auto& [name, value] : action["values"].items()) {
    const auto v = protocol::KnobValueFromJson(value);
    if (!v) {
      error = "knob '" + name + "' has a value that is not an integer, number or string";
      return std::nullopt;
    }
    m.knobs[name] = *v;
  }
  m.key = KnobsKey(m.knobs);
  return m;
}

std::unique_ptr<MeasurementStore> MeasurementStore::Open(const std::filesystem::path& file, std::string& error) {
  auto store = std::make_unique<MeasurementStore>();
  store->file_ = file;
  if (file.empty()) return store;
  if (std::filesystem::exists(file)) {
    std::ifstream in(file);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.empty()) continue;
      const json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
      std::string why;
      const auto m = row.is_discarded() ? std::nullopt : MeasurementFromJson(row, why);
      if (!m) continue;  // a torn last line after a crash, or a row of another kind
      store->by_task_[m->task].emplace(m->key, *m);
    }
  } else if (file.has_parent_path()) {
    std::filesystem::create_directories(file.parent_path());
  }
  store->out_.open(file, std::ios::app);
  if (!store->out_) {
    error = "cannot open " + file.string() + " for appending";
    return nullptr;
  }
  return store;
}

const Measurement* MeasurementStore::Find(const std::string& task, const std::string& key) const {
  const auto t = by_task_.find(task);
  if (t == by_task_.end()) return nullptr;
  const auto m = t->second.find(key);
  return m == t->second.end() ? nullptr : &m->second;
}

bool MeasurementStore::Add(const Measurement& m, std::string& error) {
  if (!by_task_[m.task].emplace(m.key, m).second) return true;
  if (file_.empty()) return true;
  out_ << MeasurementToJson(m).dump() << "\n";
  out_.flush();  // a crash loses at most the line being written
  if (!out_) {
    error = "cannot append to " + file_.string();
    return false;
  }
  return true;
}

std::vector<const Measurement*> MeasurementStore::ForTask(const std::string& task) const {
  std::vector<const Measurement*> out;
  const auto t = by_task_.find(task);
  if (t != by_task_.end())
    for (const auto& [key, m] : t->second) out.push_back(&m);
  return out;
}

std::size_t MeasurementStore::size() const {
  std::size_t n = 0;
  for (const auto& [task, m] : by_task_) n += m.size();
  return n;
}

std::optional<KnobDataset> LoadKnobDataset(const std::vector<std::filesystem::path>& files, std::string& error) {
  KnobDataset data;
  std::map<std::string, std::set<std::string>> seen;
  for (const auto& file : files) {
    std::ifstream in(file);
    if (!in) {
      error = "cannot read " + file.string();
      return std::nullopt;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
      std::string why;
      const auto m = row.is_discarded() ? std::nullopt : MeasurementFromJson(row, why);
      if (!m || m->key == kStarterKey) {
        ++data.skipped;
        continue;
      }
      ++data.rows;
      if (seen[m->task].insert(m->key).second) data.by_task[m->task].push_back(*m);
    }
  }
  return data;
}

Evaluator::Evaluator(client::Client& client, MeasurementStore& store, EvaluatorOptions options)
    : client_(client), store_(store), options_(std::move(options)) {
  feature_names_ = client_.Hello().feature_names;
}

Evaluator::~Evaluator() {
  for (auto& [task, envs] : envs_)
    for (Env& env : envs) try {
        client_.Close(env.id);
      } catch (const std::exception&) {
        // The server may be gone already; its idle timeout reaps the env.
      }
}

const protocol::TaskInfo& Evaluator::Task(const std::string& task) {
  auto it = tasks_.find(task);
  // This backend's template at the top level: on pallas the version's knobs, never task.json's.
  if (it == tasks_.end()) it = tasks_.emplace(task, TaskForBackend(client_.GetTask(task), options_.backend)).first;
  return it->second;
}

Evaluator::Env& Evaluator::MakeEnv(const std::string& task) {
  protocol::EnvMakeRequest make;
  make.task = task;
  make.backend = options_.backend;
  // History-free, so a stored reward is what the env would give again; failures well below any
  // correct kernel's log-speedup (the slowest templated settings are about e^-3 the reference).
  make.reward = "log_speedup";
  make.reward_config = {{"penalties",
                         {{"compile_failure", -5}, {"incorrect", -5}, {"crash", -5}, {"violation", -5}, {"implausible", -5}}}};
  make.max_steps = 10000;
  make.time_budget_s = 1e6;
  make.record = options_.record;
  const protocol::EnvInfo info = client_.Make(make);
  envs_[task].push_back({info.env, /*needs_reset=*/true});
  return envs_[task].back();
}

Measurement Evaluator::FromObservation(const std::string& task, const std::string& key, const KnobMap& knobs,
                                       const protocol::Observation& observation, double reward, const json& info) {
  Measurement m;
  m.task = task;
  m.backend = options_.backend;
  m.key = key;
  m.knobs = knobs;
  m.status = observation.status;
  m.speedup = policies::PaidSpeedup(observation, info, m.speedup_kind);
  m.reward = reward;
  m.features = NameFeatures(feature_names_, observation.features);
  m.eval_seconds = info.contains("eval_seconds") && info["eval_seconds"].is_number() ? info["eval_seconds"].get<double>() : 0;
  return m;
}

const Measurement& Evaluator::Starter(const std::string& task) {
  if (const Measurement* m = store_.Find(task, kStarterKey)) return *m;
  Env& env = MakeEnv(task);
  const protocol::ResetResult reset = client_.Reset(env.id);
  env.needs_reset = false;
  ++evaluations_;
  const Measurement m = FromObservation(task, kStarterKey, {}, reset.observation, 0, reset.info);
  if (IsEnvironmentFailure(m.status))
    throw std::runtime_error("the starter of " + task + " could not be evaluated: " + reset.observation.message);
  std::string error;
  if (!store_.Add(m, error)) throw std::runtime_error(error);
  return *store_.Find(task, kStarterKey);
}

std::vector<Measurement> Evaluator::Measure(const std::vector<Request>& requests) {
  std::vector<Measurement> out(requests.size());
  struct Job {
    std::string task, key;
    KnobMap knobs;
    std::vector<std::size_t> requests;
  };
  std::vector<Job> jobs;
  std::map<std::pair<std::string, std::string>, std::size_t> job_of;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::string key = KnobsKey(requests[i].knobs);
    if (const Measurement* m = store_.Find(requests[i].task, key)) {
      out[i] = *m;
      ++reused_;
      continue;
    }
    auto [it, added] = job_of.emplace(std::pair{requests[i].task, key}, jobs.size());
    if (added) jobs.push_back({requests[i].task, key, requests[i].knobs, {}});
    jobs[it->second].requests.push_back(i);
  }

  std::deque<std::size_t> queue;
  for (std::size_t j = 0; j < jobs.size(); ++j) queue.push_back(j);
  std::map<std::string, std::vector<bool>> busy;  // per task, per env
  std::map<uint64_t, std::pair<std::size_t, std::size_t>> in_flight;  // request id -> (job, env index)
  while (!queue.empty() || !in_flight.empty()) {
    for (auto it = queue.begin(); it != queue.end();) {
      const Job& job = jobs[*it];
      std::vector<bool>& task_busy = busy[job.task];
      task_busy.resize(envs_[job.task].size(), false);
      std::size_t e = 0;
      while (e < task_busy.size() && task_busy[e]) ++e;
      if (e == task_busy.size()) {
        if (static_cast<int>(e) >= options_.envs_per_task) {
          ++it;
          continue;
        }
        MakeEnv(job.task);
        task_busy.push_back(false);
      }
      Env& env = envs_[job.task][e];
      // A sync call while async steps are out is fine: their replies are kept for Recv().
      if (env.needs_reset) client_.Reset(env.id);
      env.needs_reset = false;
      in_flight[client_.Send(protocol::EnvStepRequest{env.id, protocol::KnobsAction{job.knobs}, json::object()})] = {*it, e};
      task_busy[e] = true;
      it = queue.erase(it);
    }
    const std::optional<client::Reply> reply = client_.Recv(client_.options().request_timeout_s);
    if (!reply) throw std::runtime_error("no reply to an env.step within " + std::to_string(client_.options().request_timeout_s) + " s");
    const auto flight = in_flight.find(reply->id);
    if (flight == in_flight.end()) continue;  // not ours (the client drops strays itself)
    const auto [j, e] = flight->second;
    in_flight.erase(flight);
    const Job& job = jobs[j];
    busy[job.task][e] = false;
    const protocol::StepResult r = client::AsStepResult(*reply);  // a server error reply throws, naming the op
    ++evaluations_;
    if (r.terminated || r.truncated) envs_[job.task][e].needs_reset = true;
    const Measurement m = FromObservation(job.task, job.key, job.knobs, r.observation, r.reward, r.info);
    if (!IsEnvironmentFailure(m.status)) {
      std::string error;
      if (!store_.Add(m, error)) throw std::runtime_error(error);
    }
    for (std::size_t i : job.requests) out[i] = m;
  }
  return out;
}

}  // namespace kernelgym::learned
