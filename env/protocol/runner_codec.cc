// msgpack <-> runner protocol messages (runner_messages.h). Like the client codec, decoding
// never throws and never trusts the bytes: every problem names the op and the field.
#include "core/result_json.h"
#include "core/text_safety.h"
#include "env/protocol/messages.h"
#include "env/protocol/msgpack_tree.h"
#include "env/protocol/runner_messages.h"

namespace kernelgym::protocol::runner {
namespace {

using detail::DecodeFailure;
using detail::Fields;
using detail::kUnpackLimits;
using detail::Packer;
using detail::PackJson;
using detail::ToJson;

// Envelope first (v, op), then the op's fields in declared order: one canonical encoding per
// message, which is what the golden fixtures pin down.
void Header(Packer& pk, int v, const char* op, uint32_t fields) {
  pk.pack_map(2 + fields);
  pk.pack("v"), pk.pack(v), pk.pack("op"), pk.pack(std::string(op));
}

std::string Bytes(const msgpack::sbuffer& buffer) { return std::string(buffer.data(), buffer.size()); }

// Unpacks one message and reads its envelope: the version must be ours, the op is returned.
// `handle` keeps the objects alive.
std::string OpenEnvelope(std::string_view bytes, msgpack::object_handle& handle, int& v) {
  if (bytes.size() > kMaxMessageBytes)
    throw DecodeFailure{"message of " + std::to_string(bytes.size()) + " bytes exceeds the " +
                        std::to_string(kMaxMessageBytes) + "-byte limit"};
  std::size_t offset = 0;
  try {
    handle = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, kUnpackLimits);
  } catch (const std::exception& e) {
    throw DecodeFailure{std::string("not a valid msgpack message: ") + e.what()};
  }
  if (offset != bytes.size()) throw DecodeFailure{"trailing bytes after the message"};
  Fields envelope(handle.get(), "message");
  const std::string op = envelope.String("op");
  Fields f(handle.get(), op);
  v = static_cast<int>(f.Int("v", INT32_MIN, INT32_MAX));
  if (v != kRunnerProtocolVersion)
    f.Fail("runner protocol version " + std::to_string(v) + " is not supported (this side speaks " +
           std::to_string(kRunnerProtocolVersion) + ")");
  return op;
}

FromRunner DecodeFromRunnerBody(const std::string& op, int v, const msgpack::object& map) {
  Fields f(map, op);
  f.Require("v"), f.Require("op");
  FromRunner message;
  if (op == "runner.hello") {
    RunnerHello hello;
    hello.v = v;
    hello.runner_id = f.String("runner_id");
    if (hello.runner_id.empty()) f.Fail("field 'runner_id' must not be empty");
    hello.backends = f.Strings("backends");
    if (hello.backends.empty()) f.Fail("field 'backends' must name at least one backend");
    const msgpack::object& infos = f.Require("backend_info");
    if (infos.type != msgpack::type::ARRAY) f.FieldType("backend_info", "an array", infos);
    const nlohmann::json descriptors = ToJson(infos, op + ".backend_info");
    if (descriptors.size() != hello.backends.size())
      f.Fail("field 'backend_info' must describe each of 'backends', in order");
    for (std::size_t i = 0; i < descriptors.size(); ++i) {
      std::string problem;
      std::optional<BackendInfo> info = BackendInfoFromJson(descriptors[i], problem);
      if (!info) f.Fail("field 'backend_info[" + std::to_string(i) + "]': " + problem);
      if (info->name != hello.backends[i])
        f.Fail("field 'backend_info[" + std::to_string(i) + "]' describes '" + info->name + "', not '" +
               hello.backends[i] + "'");
      hello.backend_info.push_back(std::move(*info));
    }
    hello.fingerprint = f.StringMap("fingerprint");
    hello.slots = static_cast<int>(f.Int("slots", 1, 4096));
    hello.pid = f.Int("pid", 0, INT64_MAX);
    message = std::move(hello);
  } else if (op == "heartbeat") {
    message = Heartbeat{static_cast<int>(f.Int("busy", 0, 4096))};
  } else if (op == "result") {
    JobDone done;
    done.job_id = f.Unsigned("job_id");
    done.instance = f.String("instance");
    done.task_digest = f.String("task_digest");
    const msgpack::object& tree = f.Require("result");
    if (tree.type != msgpack::type::MAP) f.FieldType("result", "a map", tree);
    std::string problem;
    std::optional<EvalResult> result = ResultFromJson(ToJson(tree, op + ".result"), problem);
    if (!result) f.Fail("field 'result' is not an evaluation result: " + problem);
    // A runner of another build (or language) may send text that is not UTF-8: the server
    // passes result text on to clients (msgpack str, decoded strictly in Python) and to the
    // trajectory store, so it is made valid here, where it arrives.
    MakeResultTextValid(*result);
    done.result = std::move(*result);
    message = std::move(done);
  } else {
    throw DecodeFailure{"unknown op '" + op + "' from a runner (runner.hello, heartbeat, result)"};
  }
  f.Finish();
  return message;
}

ToRunner DecodeToRunnerBody(const std::string& op, const msgpack::object& map) {
  Fields f(map, op);
  f.Require("v"), f.Require("op");
  ToRunner message;
  if (op == "welcome") {
    const double interval = f.Number("heartbeat_interval_s", 0);
    if (interval <= 0) f.Fail("field 'heartbeat_interval_s' must be > 0");
    message = Welcome{interval};
  } else if (op == "job") {
    Job job;
    job.job_id = f.Unsigned("job_id");
    job.instance = f.String("instance");
    if (job.instance.empty()) f.Fail("field 'instance' must not be empty");
    job.backend = f.String("backend");
    job.task = f.String("task");
    job.task_digest = f.String("task_digest");
    job.source = f.String("source");
    Fields o(f.Require("options"), op + ".options");
    job.options.seeds = o.Unsigneds("seeds");
    job.options.timing_seed = o.Unsigned("timing_seed");
    job.options.run_timing = o.Bool("run_timing");
    job.options.timing_budget_s = o.Number("timing_budget_s", 0);
    job.options.min_rounds = static_cast<int>(o.Int("min_rounds", 0, 1 << 20));
    job.options.target_relative_ci = o.Number("target_relative_ci", 0);
    o.Finish();
    message = std::move(job);
  } else if (op == "ack") {
    message = Ack{};
  } else if (op == "reregister") {
    message = Reregister{};
  } else {
    throw DecodeFailure{"unknown op '" + op + "' from a server (welcome, job, ack, reregister)"};
  }
  f.Finish();
  return message;
}

}  // namespace

std::string Encode(const FromRunner& message) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, RunnerHello>) {
          Header(pk, m.v, "runner.hello", 6);
          pk.pack("runner_id"), pk.pack(m.runner_id), pk.pack("backends"), pk.pack(m.backends);
          nlohmann::json infos = nlohmann::json::array();
          for (const BackendInfo& info : m.backend_info) infos.push_back(ToJson(info));
          pk.pack("backend_info");
          PackJson(pk, infos);
          pk.pack("fingerprint"), pk.pack(m.fingerprint), pk.pack("slots"), pk.pack(m.slots);
          pk.pack("pid"), pk.pack(m.pid);
        } else if constexpr (std::is_same_v<M, Heartbeat>) {
          Header(pk, kRunnerProtocolVersion, "heartbeat", 1);
          pk.pack("busy"), pk.pack(m.busy);
        } else {
          Header(pk, kRunnerProtocolVersion, "result", 4);
          pk.pack("job_id"), pk.pack(m.job_id), pk.pack("instance"), pk.pack(m.instance);
          pk.pack("task_digest"), pk.pack(m.task_digest), pk.pack("result");
          PackJson(pk, ResultToJson(m.result, /*include_samples=*/true));
        }
      },
      message);
  return Bytes(buffer);
}

std::string Encode(const ToRunner& message) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Welcome>) {
          Header(pk, kRunnerProtocolVersion, "welcome", 1);
          pk.pack("heartbeat_interval_s"), pk.pack(m.heartbeat_interval_s);
        } else if constexpr (std::is_same_v<M, Job>) {
          Header(pk, kRunnerProtocolVersion, "job", 7);
          pk.pack("job_id"), pk.pack(m.job_id), pk.pack("instance"), pk.pack(m.instance);
          pk.pack("backend"), pk.pack(m.backend);
          pk.pack("task"), pk.pack(m.task), pk.pack("task_digest"), pk.pack(m.task_digest), pk.pack("source"), pk.pack(m.source), pk.pack("options");
          const JobOptions& o = m.options;
          pk.pack_map(6);
          pk.pack("seeds"), pk.pack(o.seeds), pk.pack("timing_seed"), pk.pack(o.timing_seed);
          pk.pack("run_timing"), pk.pack(o.run_timing), pk.pack("timing_budget_s"), pk.pack(o.timing_budget_s);
          pk.pack("min_rounds"), pk.pack(o.min_rounds), pk.pack("target_relative_ci"), pk.pack(o.target_relative_ci);
        } else if constexpr (std::is_same_v<M, Ack>) {
          Header(pk, kRunnerProtocolVersion, "ack", 0);
        } else {
          Header(pk, kRunnerProtocolVersion, "reregister", 0);
        }
      },
      message);
  return Bytes(buffer);
}

std::optional<FromRunner> DecodeFromRunner(std::string_view bytes, std::string& problem) {
  try {
    msgpack::object_handle handle;
    int v = 0;
    const std::string op = OpenEnvelope(bytes, handle, v);
    return DecodeFromRunnerBody(op, v, handle.get());
  } catch (const DecodeFailure& failure) {
    problem = failure.message;
  } catch (const std::exception& e) {  // a bug in the codec must still be an answer, not a crash
    problem = std::string("decoding failed: ") + e.what();
  }
  return std::nullopt;
}

std::optional<ToRunner> DecodeToRunner(std::string_view bytes, std::string& problem) {
  try {
    msgpack::object_handle handle;
    int v = 0;
    const std::string op = OpenEnvelope(bytes, handle, v);
    return DecodeToRunnerBody(op, handle.get());
  } catch (const DecodeFailure& failure) {
    problem = failure.message;
  } catch (const std::exception& e) {
    problem = std::string("decoding failed: ") + e.what();
  }
  return std::nullopt;
}

}  // namespace kernelgym::protocol::runner
