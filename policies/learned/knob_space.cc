#include "policies/learned/knob_space.h"

#include "core/backend_info.h"

namespace kernelgym::learned {

protocol::TaskInfo TaskForBackend(protocol::TaskInfo task, const std::string& backend) {
  if (const BackendInfo* info = FindBackendInfo(backend); info && !info->task_folder.empty()) {
    const auto version = task.versions.find(backend);
    task.knobs = version != task.versions.end() ? version->second.knobs : std::map<std::string, protocol::KnobDomain>{};
  }
  return task;
}

KnobSpace KnobSpace::FromTask(const protocol::TaskInfo& task) {
  KnobSpace space;
  // A std::map iterates in key order: the knob order is the name order on every machine.
  for (const auto& [name, knob] : task.knobs) {
    if (knob.values.empty()) continue;
    int default_index = 0;
    for (std::size_t i = 0; i < knob.values.size(); ++i)
      if (knob.values[i] == knob.default_value) default_index = static_cast<int>(i);
    space.names_.push_back(name);
    space.values_.push_back(knob.values);
    space.defaults_.push_back(default_index);
  }
  return space;
}

uint64_t KnobSpace::size() const {
  if (empty()) return 0;
  uint64_t n = 1;
  for (const auto& v : values_) n *= v.size();
  return n;
}

KnobMap KnobSpace::ToKnobs(const Setting& setting) const {
  KnobMap out;
  for (std::size_t k = 0; k < names_.size() && k < setting.size(); ++k) out[names_[k]] = values_[k][setting[k]];
  return out;
}

std::optional<Setting> KnobSpace::FromKnobs(const KnobMap& knobs) const {
  if (knobs.size() != names_.size()) return std::nullopt;
  Setting setting(names_.size(), -1);
  for (std::size_t k = 0; k < names_.size(); ++k) {
    const auto it = knobs.find(names_[k]);
    if (it == knobs.end()) return std::nullopt;
    for (std::size_t i = 0; i < values_[k].size(); ++i) {
      // An integer written as a float (8.0) in a JSON file still names the value 8.
      const bool same = values_[k][i] == it->second ||
                        (std::holds_alternative<int64_t>(values_[k][i]) && std::holds_alternative<double>(it->second) &&
                         static_cast<double>(std::get<int64_t>(values_[k][i])) == std::get<double>(it->second));
      if (same) setting[k] = static_cast<int>(i);
    }
    if (setting[k] < 0) return std::nullopt;
  }
  return setting;
}

std::string KnobSpace::Key(const Setting& setting) const {
  std::string key;
  for (std::size_t k = 0; k < names_.size() && k < setting.size(); ++k) {
    if (k) key += ",";
    key += names_[k] + "=" + protocol::KnobValueText(values_[k][setting[k]]);
  }
  return key;
}

std::vector<Setting> KnobSpace::Enumerate() const {
  std::vector<Setting> all;
  if (empty()) return all;
  Setting s(names_.size(), 0);
  while (true) {
    all.push_back(s);
    std::size_t k = names_.size();
    while (k > 0) {
      --k;
      if (++s[k] < static_cast<int>(values_[k].size())) break;
      s[k] = 0;
      if (k == 0) return all;
    }
  }
}

Setting KnobSpace::Random(std::mt19937_64& rng) const {
  Setting s(names_.size());
  for (std::size_t k = 0; k < names_.size(); ++k)
    s[k] = static_cast<int>(std::uniform_int_distribution<std::size_t>(0, values_[k].size() - 1)(rng));
  return s;
}

}  // namespace kernelgym::learned
