// A task's knob template as an action space for learned policies: the knobs in name order, each
// with its domain, a setting as one value index per knob. Torch-free (the trainer, the features
// and `kernelgym search --cost-model` use it without loading libtorch).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "env/protocol/messages.h"
#include "env/protocol/task_info.h"

namespace kernelgym::learned {

using Setting = std::vector<int>;  // Setting[k]: the index of knob k's value in its domain
using KnobMap = std::map<std::string, protocol::KnobValue>;

// The task as a knob policy on `backend` sees it: its top-level knobs made that backend's template
// (on a backend whose tasks come from a subfolder, pallas, that version's knobs, or none; on cpu
// task.json's). KnobSpace::FromTask, the features and every knob policy read the top level, so a
// task's cpu template is never offered on pallas (the runner would refuse every setting of it).
protocol::TaskInfo TaskForBackend(protocol::TaskInfo task, const std::string& backend);

class KnobSpace {
 public:
  // From tasks.get's knobs; empty() when the task has no template.
  static KnobSpace FromTask(const protocol::TaskInfo& task);

  bool empty() const { return names_.empty(); }
  std::size_t knobs() const { return names_.size(); }
  const std::string& name(std::size_t k) const { return names_[k]; }
  const std::vector<protocol::KnobValue>& values(std::size_t k) const { return values_[k]; }
  const Setting& defaults() const { return defaults_; }
  // Settings in all: the product of the domain sizes.
  uint64_t size() const;

  KnobMap ToKnobs(const Setting& setting) const;
  // nullopt when a knob is missing, unknown or has a value outside its domain.
  std::optional<Setting> FromKnobs(const KnobMap& knobs) const;
  // "EXP=exp_poly,SIMD=1": the setting as the command line writes it; a stable key.
  std::string Key(const Setting& setting) const;
  std::vector<Setting> Enumerate() const;  // every setting, in lexicographic index order
  Setting Random(std::mt19937_64& rng) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<protocol::KnobValue>> values_;
  Setting defaults_;
};

}  // namespace kernelgym::learned
