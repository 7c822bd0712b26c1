#include "tpu_runner/cpu/harness_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kernelgym {

using nlohmann::json;

std::string EncodeFrame(const Frame& frame) {
  const std::string meta = frame.meta.dump();
  std::string out(16, '\0');
  const uint32_t kind = static_cast<uint32_t>(frame.kind), meta_len = static_cast<uint32_t>(meta.size());
  const uint64_t data_len = frame.data.size();
  std::memcpy(out.data(), &kind, 4);
  std::memcpy(out.data() + 4, &meta_len, 4);
  std::memcpy(out.data() + 8, &data_len, 8);
  out += meta;
  out += frame.data;
  return out;
}

std::optional<Frame> FrameDecoder::Next() {
  if (!error_.empty() || buffer_.size() < 16) return std::nullopt;
  uint32_t kind, meta_len;
  uint64_t data_len;
  std::memcpy(&kind, buffer_.data(), 4);
  std::memcpy(&meta_len, buffer_.data() + 4, 4);
  std::memcpy(&data_len, buffer_.data() + 8, 8);
  if (kind < 1 || kind > static_cast<uint32_t>(FrameKind::kDone) || meta_len > kMaxMetaBytes || data_len > kMaxDataBytes) {
    error_ = "malformed frame header (kind " + std::to_string(kind) + ", meta " + std::to_string(meta_len) + " B)";
    return std::nullopt;
  }
  if (buffer_.size() < 16 + meta_len + data_len) return std::nullopt;
  Frame frame;
  frame.kind = static_cast<FrameKind>(kind);
  try {
    frame.meta = json::parse(buffer_.begin() + 16, buffer_.begin() + 16 + meta_len);
  } catch (const json::exception& e) {
    error_ = std::string("malformed frame metadata: ") + e.what();
    return std::nullopt;
  }
  frame.data.assign(buffer_, 16 + meta_len, data_len);
  buffer_.erase(0, 16 + meta_len + data_len);
  return frame;
}

bool WriteAll(int fd, const std::string& bytes) {
  std::size_t done = 0;
  bool socket = true;
  while (done < bytes.size()) {
    // On a socket, MSG_NOSIGNAL turns a vanished peer into EPIPE instead of SIGPIPE.
    ssize_t n = socket ? send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL) : -1;
    if (n < 0 && socket && errno == ENOTSOCK) {
      socket = false;
      continue;
    }
    if (!socket) n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

json TensorToJson(const TensorSpec& t) {
  json j{{"name", t.name}, {"dtype", std::string(DTypeName(t.dtype))}, {"shape", t.shape},
         {"atol", t.tolerance.atol}, {"rtol", t.tolerance.rtol}};
  if (t.init)
    j["init"] = {{"kind", static_cast<int>(t.init->kind)}, {"a", t.init->a}, {"b", t.init->b}, {"step", t.init->step}};
  return j;
}

TensorSpec TensorFromJson(const json& j) {
  TensorSpec t;
  t.name = j.at("name").get<std::string>();
  auto dtype = ParseDType(j.at("dtype").get<std::string>());
  if (!dtype) throw json::other_error::create(501, "bad dtype", &j);
  t.dtype = *dtype;
  t.shape = j.at("shape").get<std::vector<int64_t>>();
  t.tolerance = {j.at("atol").get<double>(), j.at("rtol").get<double>()};
  if (j.contains("init")) {
    const json& init = j["init"];
    t.init = Initializer{static_cast<Initializer::Kind>(init.at("kind").get<int>()), init.at("a").get<double>(),
                         init.at("b").get<double>(), init.at("step").get<double>()};
  }
  return t;
}

int HarnessJob::NumTrials() const {
  int n = 0;
  for (const ShapeSetJob& s : shape_sets) n += static_cast<int>(s.seeds.size());
  return n;
}

json JobToJson(const HarnessJob& job) {
  json shape_sets = json::array();
  for (const ShapeSetJob& set : job.shape_sets) {
    json inputs = json::array(), outputs = json::array(), sizes = json::array();
    for (const auto& t : set.inputs) inputs.push_back(TensorToJson(t));
    for (const auto& t : set.outputs) outputs.push_back(TensorToJson(t));
    for (const auto& s : set.sizes) sizes.push_back({{"name", s.name}, {"value", s.value}});
    shape_sets.push_back({{"inputs", inputs}, {"outputs", outputs}, {"sizes", sizes}, {"seeds", set.seeds}});
  }
  return {{"shape_sets", shape_sets},
          {"threads", job.threads},
          {"reference_source", job.reference_source},
          {"timing_seed", job.timing_seed},
          {"timing",
           {{"budget_seconds", job.timing.budget_seconds},
            {"min_rounds", job.timing.min_rounds},
            {"max_rounds", job.timing.max_rounds},
            {"target_relative_ci", job.timing.target_relative_ci},
            {"warmup_rounds", job.timing.warmup_rounds},
            {"refresh_inputs", job.timing.refresh_inputs}}},
          {"run_timing", job.run_timing},
          {"kernel_path", job.kernel_path},
          {"libraries", job.libraries},
          {"sandbox_uid", job.sandbox_uid},
          {"cpus", job.cpus},
          {"cpu_seconds", job.cpu_seconds},
          {"address_space", job.address_space},
          {"call_limit_factor", job.call_limit_factor},
          {"min_call_seconds", job.min_call_seconds},
          {"max_call_seconds", job.max_call_seconds}};
}

HarnessJob JobFromJson(const json& j) {
  HarnessJob job;
  for (const json& s : j.at("shape_sets")) {
    ShapeSetJob set;
    for (const auto& t : s.at("inputs")) set.inputs.push_back(TensorFromJson(t));
    for (const auto& t : s.at("outputs")) set.outputs.push_back(TensorFromJson(t));
    for (const auto& z : s.at("sizes")) set.sizes.push_back({z.at("name").get<std::string>(), z.at("value").get<int64_t>()});
    set.seeds = s.at("seeds").get<std::vector<uint64_t>>();
    job.shape_sets.push_back(std::move(set));
  }
  job.threads = j.at("threads").get<int>();
  job.reference_source = j.at("reference_source").get<std::string>();
  job.timing_seed = j.at("timing_seed").get<uint64_t>();
  const json& t = j.at("timing");
  job.timing.budget_seconds = t.at("budget_seconds").get<double>();
  job.timing.min_rounds = t.at("min_rounds").get<int>();
  job.timing.max_rounds = t.at("max_rounds").get<int>();
  job.timing.target_relative_ci = t.at("target_relative_ci").get<double>();
  job.timing.warmup_rounds = t.at("warmup_rounds").get<int>();
  job.timing.refresh_inputs = t.at("refresh_inputs").get<bool>();
  job.run_timing = j.at("run_timing").get<bool>();
  job.kernel_path = j.at("kernel_path").get<std::string>();
  job.libraries = j.at("libraries").get<std::vector<std::string>>();
  job.sandbox_uid = j.at("sandbox_uid").get<uint32_t>();
  job.cpus = j.at("cpus").get<std::vector<int>>();
  job.cpu_seconds = j.at("cpu_seconds").get<double>();
  job.address_space = j.at("address_space").get<std::size_t>();
  job.call_limit_factor = j.at("call_limit_factor").get<double>();
  job.min_call_seconds = j.at("min_call_seconds").get<double>();
  job.max_call_seconds = j.at("max_call_seconds").get<double>();
  return job;
}

}  // namespace kernelgym
