// The runner <-> harness wire format (tpu_runner/cpu/harness_protocol.h): frames and the job.
#include "tpu_runner/cpu/harness_protocol.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace kernelgym {
namespace {

using nlohmann::json;

std::string BinaryData() {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 37 % 256));  // includes NULs
  return data;
}

Frame MakeFrame(FrameKind kind, json meta, std::string data) {
  Frame f;
  f.kind = kind;
  f.meta = std::move(meta);
  f.data = std::move(data);
  return f;
}

void ExpectSameFrame(const Frame& a, const Frame& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.meta, b.meta);
  EXPECT_EQ(a.data, b.data);
}

// The 16-byte header: [u32 kind][u32 meta_len][u64 data_len], native (little-endian) order.
std::string Header(uint32_t kind, uint32_t meta_len, uint64_t data_len) {
  std::string h(16, '\0');
  std::memcpy(h.data(), &kind, 4);
  std::memcpy(h.data() + 4, &meta_len, 4);
  std::memcpy(h.data() + 8, &data_len, 8);
  return h;
}

TEST(EncodeFrame, LayoutIsHeaderMetaData) {
  const Frame f = MakeFrame(FrameKind::kTrialOutput, {{"trial", 1}, {"output", "y"}, {"call", 0}}, "abc");
  const std::string bytes = EncodeFrame(f);
  const std::string meta = f.meta.dump();
  ASSERT_EQ(bytes.size(), 16 + meta.size() + 3);
  EXPECT_EQ(bytes.substr(0, 16), Header(5, static_cast<uint32_t>(meta.size()), 3));
  EXPECT_EQ(bytes.substr(16, meta.size()), meta);
  EXPECT_EQ(bytes.substr(16 + meta.size()), "abc");
}

TEST(FrameDecoder, RoundTrip) {
  const Frame f = MakeFrame(FrameKind::kTrialOutput, {{"trial", 2}, {"output", "y"}, {"call", 3}}, BinaryData());
  const std::string bytes = EncodeFrame(f);
  FrameDecoder decoder;
  decoder.Feed(bytes.data(), bytes.size());
  const std::optional<Frame> got = decoder.Next();
  ASSERT_TRUE(got.has_value()) << decoder.error();
  ExpectSameFrame(*got, f);
  EXPECT_FALSE(decoder.Next().has_value());
  EXPECT_TRUE(decoder.error().empty());
}

TEST(FrameDecoder, EveryKindRoundTrips) {
  for (uint32_t k = 1; k <= static_cast<uint32_t>(FrameKind::kDone); ++k) {
    SCOPED_TRACE(k);
    const Frame f = MakeFrame(static_cast<FrameKind>(k), {{"k", k}}, std::string(k, 'x'));
    const std::string bytes = EncodeFrame(f);
    FrameDecoder decoder;
    decoder.Feed(bytes.data(), bytes.size());
    const auto got = decoder.Next();
    ASSERT_TRUE(got.has_value()) << decoder.error();
    ExpectSameFrame(*got, f);
  }
}

TEST(FrameDecoder, EmptyDataAndDefaultMeta) {
  const Frame f;  // kEvent, {}, ""
  const std::string bytes = EncodeFrame(f);
  EXPECT_EQ(bytes.size(), 16u + 2u);  // "{}"
  FrameDecoder decoder;
  decoder.Feed(bytes.data(), bytes.size());
  const auto got = decoder.Next();
  ASSERT_TRUE(got.has_value()) << decoder.error();
  EXPECT_EQ(got->kind, FrameKind::kEvent);
  EXPECT_TRUE(got->meta.is_object());
  EXPECT_TRUE(got->meta.empty());
  EXPECT_TRUE(got->data.empty());
}

TEST(FrameDecoder, ByteByByteFeeding) {
  const Frame f =
      MakeFrame(FrameKind::kTiming, {{"samples", json::array({1.5, 2.5})}, {"converged", true}}, BinaryData());
  const std::string bytes = EncodeFrame(f);
  FrameDecoder decoder;
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    decoder.Feed(&bytes[i], 1);
    ASSERT_FALSE(decoder.Next().has_value()) << "a frame after only " << i + 1 << " of " << bytes.size() << " bytes";
    ASSERT_TRUE(decoder.error().empty()) << decoder.error();
  }
  decoder.Feed(&bytes.back(), 1);
  const auto got = decoder.Next();
  ASSERT_TRUE(got.has_value()) << decoder.error();
  ExpectSameFrame(*got, f);
  EXPECT_FALSE(decoder.Next().has_value());
}

TEST(FrameDecoder, SeveralFramesInOneBuffer) {
  const std::vector<Frame> frames{
      MakeFrame(FrameKind::kEvent, {{"phase", "reference"}}, ""),
      MakeFrame(FrameKind::kExpected, {{"trial", 0}, {"output", "y"}}, BinaryData()),
      MakeFrame(FrameKind::kCounters, {{"counters", {{"task_clock_ns", 12.5}}}, {"unavailable", json::array()}}, ""),
      MakeFrame(FrameKind::kDone, json::object(), std::string(5, '\0')),
  };
  std::string stream;
  for (const Frame& f : frames) stream += EncodeFrame(f);
  // Plus the first half of one more frame.
  const std::string extra = EncodeFrame(MakeFrame(FrameKind::kFatal, {{"message", "boom"}}, "zz"));
  stream += extra.substr(0, extra.size() / 2);

  FrameDecoder decoder;
  decoder.Feed(stream.data(), stream.size());
  for (const Frame& f : frames) {
    const auto got = decoder.Next();
    ASSERT_TRUE(got.has_value()) << decoder.error();
    ExpectSameFrame(*got, f);
  }
  EXPECT_FALSE(decoder.Next().has_value());
  decoder.Feed(extra.data() + extra.size() / 2, extra.size() - extra.size() / 2);
  const auto last = decoder.Next();
  ASSERT_TRUE(last.has_value()) << decoder.error();
  EXPECT_EQ(last->kind, FrameKind::kFatal);
  EXPECT_EQ(last->meta["message"], "boom");
  EXPECT_TRUE(decoder.error().empty());
}

TEST(FrameDecoder, IncompleteHeaderIsNotAnError) {
  FrameDecoder decoder;
  const std::string header = Header(4, 2, 0);
  decoder.Feed(header.data(), 15);
  EXPECT_FALSE(decoder.Next().has_value());
  EXPECT_TRUE(decoder.error().empty());
}

void ExpectMalformed(const std::string& bytes, const std::string& what) {
  FrameDecoder decoder;
  decoder.Feed(bytes.data(), bytes.size());
  EXPECT_FALSE(decoder.Next().has_value());
  EXPECT_FALSE(decoder.error().empty());
  EXPECT_NE(decoder.error().find(what), std::string::npos) << decoder.error();
  // The stream is dead: a valid frame afterwards does not resurrect it.
  const std::string good = EncodeFrame(MakeFrame(FrameKind::kDone, json::object(), ""));
  decoder.Feed(good.data(), good.size());
  EXPECT_FALSE(decoder.Next().has_value());
  EXPECT_FALSE(decoder.error().empty());
}

TEST(FrameDecoder, BadKindIsAnError) {
  ExpectMalformed(Header(0, 2, 0) + "{}", "kind 0");
  ExpectMalformed(Header(13, 2, 0) + "{}", "kind 13");
  ExpectMalformed(Header(0xffffffffu, 2, 0) + "{}", "malformed frame header");
}

TEST(FrameDecoder, OversizeLengthsAreAnError) {
  // Rejected from the header alone, before the (never sent) payload.
  ExpectMalformed(Header(4, kMaxMetaBytes + 1, 0), "malformed frame header");
  ExpectMalformed(Header(4, 0xffffffffu, 0), "malformed frame header");
  ExpectMalformed(Header(4, 2, kMaxDataBytes + 1), "malformed frame header");
  ExpectMalformed(Header(4, 2, std::numeric_limits<uint64_t>::max()), "malformed frame header");
}

TEST(FrameDecoder, LimitsThemselvesAreAccepted) {
  // A header at the limits is not malformed: the decoder just waits for the bytes.
  FrameDecoder decoder;
  const std::string header = Header(4, kMaxMetaBytes, kMaxDataBytes);
  decoder.Feed(header.data(), header.size());
  EXPECT_FALSE(decoder.Next().has_value());
  EXPECT_TRUE(decoder.error().empty()) << decoder.error();
}

TEST(FrameDecoder, BadMetadataIsAnError) {
  ExpectMalformed(Header(4, 9, 0) + "{not json", "malformed frame metadata");
  ExpectMalformed(Header(4, 0, 0), "malformed frame metadata");  // empty meta is not JSON
}

// ---------------------------------------------------------------------------------------------
// The job.

HarnessJob SampleJob() {
  HarnessJob job;
  TensorSpec x;
  x.name = "x";
  x.dtype = DType::kFloat32;
  x.shape = {512, 1024};
  x.init = Initializer{Initializer::Kind::kNormal, 0.25, 3.0};
  TensorSpec w;
  w.name = "w";
  w.dtype = DType::kFloat64;
  w.shape = {1024};
  w.init = Initializer{Initializer::Kind::kUniform, -0.5, 1.5, 0.0625};  // on a grid
  TensorSpec idx;
  idx.name = "idx";
  idx.dtype = DType::kInt64;
  idx.shape = {7, 3};
  idx.init = Initializer{Initializer::Kind::kRandInt, -4, 9};
  TensorSpec y;
  y.name = "y";
  y.dtype = DType::kFloat32;
  y.shape = {512, 1024};
  y.tolerance = {1e-6, 1e-4};
  TensorSpec counts;
  counts.name = "counts";
  counts.dtype = DType::kInt32;
  counts.shape = {3};
  counts.tolerance = {0, 0};
  ShapeSetJob timed;
  timed.inputs = {x, w, idx};
  timed.outputs = {y, counts};
  timed.sizes = {{"R", 512}, {"C", 1024}, {"BIG", int64_t{1} << 40}};
  timed.seeds = {0, 1, 0xffffffffffffffffULL, 0x8000000000000001ULL};
  ShapeSetJob other = timed;
  other.inputs[0].shape = {3, 5};
  other.outputs[0].shape = {3, 5};
  other.sizes = {{"R", 3}, {"C", 5}, {"BIG", 7}};
  other.seeds = {42};
  job.shape_sets = {timed, other};
  job.threads = 4;
  job.reference_source = "def reference(x: Tensor) -> Tensor:\n    return torch.softmax(x, dim=1)  # \"quoted\" \\\n";
  job.timing_seed = 0xfedcba9876543210ULL;
  job.timing.budget_seconds = 2.5;
  job.timing.min_rounds = 11;
  job.timing.max_rounds = 777;
  job.timing.target_relative_ci = 0.015;
  job.timing.warmup_rounds = 5;
  job.timing.refresh_inputs = false;
  job.run_timing = false;
  job.kernel_path = "/work/kernel.so";
  job.sandbox_uid = 4294967295u;
  job.libraries = {"libc", "libgomp"};
  job.cpus = {1, 3};
  job.cpu_seconds = 12.5;
  job.address_space = std::size_t{3} << 30;
  job.call_limit_factor = 40;
  job.min_call_seconds = 0.25;
  job.max_call_seconds = 9;
  return job;
}

void ExpectSameTensor(const TensorSpec& a, const TensorSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.tolerance.atol, b.tolerance.atol);
  EXPECT_EQ(a.tolerance.rtol, b.tolerance.rtol);
  ASSERT_EQ(a.init.has_value(), b.init.has_value()) << a.name;
  if (a.init) {
    EXPECT_EQ(a.init->kind, b.init->kind);
    EXPECT_EQ(a.init->a, b.init->a);
    EXPECT_EQ(a.init->b, b.init->b);
    EXPECT_EQ(a.init->step, b.init->step);
  }
}

void ExpectSameJob(const HarnessJob& a, const HarnessJob& b) {
  ASSERT_EQ(a.shape_sets.size(), b.shape_sets.size());
  for (std::size_t s = 0; s < a.shape_sets.size(); ++s) {
    const ShapeSetJob &x = a.shape_sets[s], &y = b.shape_sets[s];
    ASSERT_EQ(x.inputs.size(), y.inputs.size());
    for (std::size_t i = 0; i < x.inputs.size(); ++i) ExpectSameTensor(x.inputs[i], y.inputs[i]);
    ASSERT_EQ(x.outputs.size(), y.outputs.size());
    for (std::size_t i = 0; i < x.outputs.size(); ++i) ExpectSameTensor(x.outputs[i], y.outputs[i]);
    ASSERT_EQ(x.sizes.size(), y.sizes.size());
    for (std::size_t i = 0; i < x.sizes.size(); ++i) {
      EXPECT_EQ(x.sizes[i].name, y.sizes[i].name);
      EXPECT_EQ(x.sizes[i].value, y.sizes[i].value);
    }
    EXPECT_EQ(x.seeds, y.seeds);
  }
  EXPECT_EQ(a.NumTrials(), b.NumTrials());
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.reference_source, b.reference_source);
  EXPECT_EQ(a.timing_seed, b.timing_seed);
  EXPECT_EQ(a.timing.budget_seconds, b.timing.budget_seconds);
  EXPECT_EQ(a.timing.min_rounds, b.timing.min_rounds);
  EXPECT_EQ(a.timing.max_rounds, b.timing.max_rounds);
  EXPECT_EQ(a.timing.target_relative_ci, b.timing.target_relative_ci);
  EXPECT_EQ(a.timing.warmup_rounds, b.timing.warmup_rounds);
  EXPECT_EQ(a.timing.refresh_inputs, b.timing.refresh_inputs);
  EXPECT_EQ(a.run_timing, b.run_timing);
  EXPECT_EQ(a.kernel_path, b.kernel_path);
  EXPECT_EQ(a.sandbox_uid, b.sandbox_uid);
  EXPECT_EQ(a.libraries, b.libraries);
  EXPECT_EQ(a.cpus, b.cpus);
  EXPECT_EQ(a.cpu_seconds, b.cpu_seconds);
  EXPECT_EQ(a.address_space, b.address_space);
  EXPECT_EQ(a.call_limit_factor, b.call_limit_factor);
  EXPECT_EQ(a.min_call_seconds, b.min_call_seconds);
  EXPECT_EQ(a.max_call_seconds, b.max_call_seconds);
}

TEST(HarnessJob, JsonRoundTrip) {
  const HarnessJob job = SampleJob();
  const HarnessJob back = JobFromJson(JobToJson(job));
  ExpectSameJob(job, back);
}

TEST(HarnessJob, RoundTripThroughAFrame) {
  // The way the runner actually sends it: as the meta of a kJob frame.
  const HarnessJob job = SampleJob();
  const std::string bytes = EncodeFrame(MakeFrame(FrameKind::kJob, JobToJson(job), ""));
  FrameDecoder decoder;
  decoder.Feed(bytes.data(), bytes.size());
  const auto frame = decoder.Next();
  ASSERT_TRUE(frame.has_value()) << decoder.error();
  EXPECT_EQ(frame->kind, FrameKind::kJob);
  ExpectSameJob(job, JobFromJson(frame->meta));
}

TEST(HarnessJob, DefaultJobRoundTrips) {
  const HarnessJob job;
  ExpectSameJob(job, JobFromJson(JobToJson(job)));
}

TEST(HarnessJob, BadJsonThrows) {
  json j = JobToJson(SampleJob());
  j.erase("call_limit_factor");
  EXPECT_THROW(JobFromJson(j), json::exception);

  j = JobToJson(SampleJob());
  j["shape_sets"][0]["inputs"][0]["dtype"] = "float16";
  EXPECT_THROW(JobFromJson(j), json::exception);

  j = JobToJson(SampleJob());
  j["threads"] = "four";
  EXPECT_THROW(JobFromJson(j), json::exception);

  j = JobToJson(SampleJob());
  j["timing"].erase("budget_seconds");
  EXPECT_THROW(JobFromJson(j), json::exception);

  EXPECT_THROW(JobFromJson(json::object()), json::exception);
}

TEST(WriteAll, WritesEverythingAndFailsOnAClosedPipe) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string bytes = EncodeFrame(MakeFrame(FrameKind::kEvent, {{"phase", "x"}}, BinaryData()));
  ASSERT_LT(bytes.size(), 4096u);  // fits the pipe buffer: no reader needed
  EXPECT_TRUE(WriteAll(fds[1], bytes));
  std::string read_back(bytes.size(), '\0');
  ASSERT_EQ(read(fds[0], read_back.data(), read_back.size()), static_cast<ssize_t>(bytes.size()));
  EXPECT_EQ(read_back, bytes);
  close(fds[0]);
  // The reader is gone: EPIPE (SIGPIPE ignored for this process), reported as false.
  auto old = std::signal(SIGPIPE, SIG_IGN);
  EXPECT_FALSE(WriteAll(fds[1], bytes));
  std::signal(SIGPIPE, old);
  close(fds[1]);
  EXPECT_FALSE(WriteAll(-1, "x"));
  EXPECT_TRUE(WriteAll(-1, ""));  // nothing to write
}

}  // namespace
}  // namespace kernelgym
