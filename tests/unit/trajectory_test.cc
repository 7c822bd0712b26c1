// The trajectory store (datasets/trajectory/): segment naming, the recorder's group commit,
// rotation and reopening, the reader's tolerance of torn and corrupt lines, both export formats
// field by field, and the stats figures. Crashes and write errors are in
// tests/integration/trajectory_crash_test.cc (they need child processes).
#include "tests/common/temp_dir.h"
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "datasets/trajectory/dataset_command.h"
#include "datasets/trajectory/export.h"
#include "datasets/trajectory/reader.h"
#include "datasets/trajectory/record_schema.h"
#include "datasets/trajectory/recorder.h"
#include "datasets/trajectory/segments.h"
#include "datasets/trajectory/store_stats.h"

namespace kernelgym {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::TempDir;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::unique_ptr<TrajectoryRecorder> OpenOrFail(const fs::path& dir, RecorderOptions options = {}) {
  std::string error;
  std::unique_ptr<TrajectoryRecorder> recorder = TrajectoryRecorder::Open(dir, options, error);
  EXPECT_NE(recorder, nullptr) << error;
  EXPECT_EQ(error, "");
  return recorder;
}

// Every record of the store, with the reader's figures.
struct ReadBack {
  std::vector<json> records;
  ReaderStats stats;
};
ReadBack ReadAll(const fs::path& dir) {
  ReadBack back;
  TrajectoryReader reader(dir);
  EXPECT_TRUE(reader.ok()) << reader.error();
  json record;
  while (reader.Next(record)) back.records.push_back(record);
  back.stats = reader.stats();
  return back;
}

std::string TokenLine(uint64_t token, std::size_t padding = 0) {
  return json{{"token", token}, {"pad", std::string(padding, 'x')}}.dump();
}

// ---------------------------------------------------------------------------------------------
// Segment names

TEST(TrajectorySegmentsTest, NamesAreNumberedAndCanonical) {
  EXPECT_EQ(SegmentFileName(1), "segment-000001.jsonl");
  EXPECT_EQ(SegmentFileName(1234567), "segment-1234567.jsonl");
  EXPECT_EQ(ParseSegmentFileName("segment-000042.jsonl"), 42u);
  EXPECT_EQ(ParseSegmentFileName("segment-1234567.jsonl"), 1234567u);
  EXPECT_EQ(ParseSegmentFileName("segment-0000042.jsonl"), std::nullopt);  // not canonical
  EXPECT_EQ(ParseSegmentFileName("segment-000000.jsonl"), std::nullopt);
  EXPECT_EQ(ParseSegmentFileName("segment-00004x.jsonl"), std::nullopt);
  EXPECT_EQ(ParseSegmentFileName("segment-000042.json"), std::nullopt);
  EXPECT_EQ(ParseSegmentFileName("other.jsonl"), std::nullopt);
}

TEST(TrajectorySegmentsTest, ListsInNumberOrderAndIgnoresOtherFiles) {
  TempDir dir;
  for (uint64_t n : {10, 2, 1000000, 9}) WriteText(dir.path() / SegmentFileName(n), "");
  WriteText(dir.path() / "notes.txt", "");
  WriteText(dir.path() / "segment-000003.jsonl.partial", "");
  fs::create_directories(dir.path() / SegmentFileName(11));  // a folder, not a segment
  std::string error;
  const std::vector<Segment> segments = ListSegments(dir.path(), error);
  EXPECT_EQ(error, "");
  std::vector<uint64_t> numbers;
  for (const Segment& s : segments) numbers.push_back(s.number);
  EXPECT_EQ(numbers, (std::vector<uint64_t>{2, 9, 10, 1000000}));

  EXPECT_TRUE(ListSegments(dir.path() / "missing", error).empty());
  EXPECT_NE(error.find("missing"), std::string::npos) << error;
}

// ---------------------------------------------------------------------------------------------
// Recorder

TEST(TrajectoryRecorderTest, WritesOneLinePerRecordAndReportsTokensInOrder) {
  TempDir dir;
  auto recorder = OpenOrFail(dir.path());
  ASSERT_NE(recorder, nullptr);
  for (uint64_t token = 100; token < 105; ++token) recorder->Submit(token, TokenLine(token));
  recorder->Close();
  EXPECT_EQ(recorder->TakeDurable(), (std::vector<uint64_t>{100, 101, 102, 103, 104}));
  EXPECT_TRUE(recorder->TakeFailed().empty());
  EXPECT_TRUE(recorder->healthy());

  const std::string text = ReadText(dir.path() / "segment-000001.jsonl");
  EXPECT_EQ(text, TokenLine(100) + "\n" + TokenLine(101) + "\n" + TokenLine(102) + "\n" + TokenLine(103) + "\n" +
                      TokenLine(104) + "\n");
  const RecorderStats stats = recorder->stats();
  EXPECT_EQ(stats.records_written, 5u);
  EXPECT_EQ(stats.bytes_written, text.size());
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_GE(stats.batches, 1u);
  EXPECT_LE(stats.batches, 5u);
  EXPECT_EQ(stats.last_error, "");
}

// The server's use: poll the eventfd, then take. Every token comes back exactly once, in order,
// with group commit (fewer fdatasyncs than records) and tokens from several submitting threads.
TEST(TrajectoryRecorderTest, NotifyFdSignalsDurableTokensInWriteOrder) {
  TempDir dir;
  RecorderOptions options;
  options.max_batch = 7;
  auto recorder = OpenOrFail(dir.path(), options);
  ASSERT_NE(recorder, nullptr);

  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 300;
  std::vector<std::thread> submitters;
  for (int t = 0; t < kThreads; ++t) {
    submitters.emplace_back([&recorder, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t token = static_cast<uint64_t>(t) * 1000000 + i;
        recorder->Submit(token, TokenLine(token, i % 50));
      }
    });
  }
  std::vector<uint64_t> durable;
  while (durable.size() < kThreads * kPerThread) {
    pollfd p{recorder->notify_fd(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 20000), 1) << "no durable tokens within 20 s; got " << durable.size();
    for (uint64_t token : recorder->TakeDurable()) durable.push_back(token);
    ASSERT_TRUE(recorder->TakeFailed().empty());
  }
  for (std::thread& t : submitters) t.join();

  // Drained: nothing more is signalled.
  pollfd p{recorder->notify_fd(), POLLIN, 0};
  if (poll(&p, 1, 0) == 1) {
    EXPECT_TRUE(recorder->TakeDurable().empty());
  }
  EXPECT_EQ(poll(&p, 1, 0), 0);

  // Durable order = file order, and each thread's tokens keep their submit order.
  const ReadBack back = ReadAll(dir.path());
  ASSERT_EQ(back.records.size(), durable.size());
  std::vector<uint64_t> next(kThreads, 0);
  for (std::size_t i = 0; i < durable.size(); ++i) {
    EXPECT_EQ(back.records[i]["token"].get<uint64_t>(), durable[i]) << "record " << i;
    const uint64_t thread = durable[i] / 1000000;
    ASSERT_LT(thread, static_cast<uint64_t>(kThreads));
    EXPECT_EQ(durable[i] % 1000000, next[thread]++) << "thread " << thread << " out of order";
  }
  const RecorderStats stats = recorder->stats();
  EXPECT_EQ(stats.records_written, kThreads * kPerThread);
  EXPECT_GE(stats.batches, kThreads * kPerThread / 7);
  EXPECT_LT(stats.batches, kThreads * kPerThread);  // group commit: several records per fdatasync
}

TEST(TrajectoryRecorderTest, RotatesBeforeASegmentWouldExceedItsLimit) {
  TempDir dir;
  RecorderOptions options;
  options.segment_max_bytes = 100;
  options.max_batch = 3;  // rotations both inside a batch and between batches
  auto recorder = OpenOrFail(dir.path(), options);
  ASSERT_NE(recorder, nullptr);
  const std::string line = TokenLine(0, 10);  // {"pad":"xxxxxxxxxx","token":N}
  ASSERT_EQ(line.size() + 1, 31u);
  for (uint64_t token = 0; token < 7; ++token) recorder->Submit(token, TokenLine(token, 10));
  recorder->Submit(7, TokenLine(7, 150));  // larger than a segment: a segment of its own
  recorder->Submit(8, TokenLine(8, 10));
  recorder->Close();
  EXPECT_EQ(recorder->TakeDurable(), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));

  std::string error;
  const std::vector<Segment> segments = ListSegments(dir.path(), error);
  ASSERT_EQ(segments.size(), 5u);
  // 3 lines of 31 bytes fit in 100; the 4th would not.
  const std::vector<std::size_t> expected_lines{3, 3, 1, 1, 1};
  for (std::size_t i = 0; i < segments.size(); ++i) {
    EXPECT_EQ(segments[i].number, i + 1);
    const std::string text = ReadText(segments[i].path);
    EXPECT_EQ(Lines(text).size(), expected_lines[i]) << segments[i].path;
    if (i != 3) {
      EXPECT_LE(text.size(), 100u) << segments[i].path;
    }
  }
  EXPECT_EQ(recorder->stats().segments, 5u);

  const ReadBack back = ReadAll(dir.path());
  ASSERT_EQ(back.records.size(), 9u);
  for (uint64_t token = 0; token < 9; ++token) EXPECT_EQ(back.records[token]["token"], token);
  EXPECT_EQ(back.stats.segments, 5u);
  EXPECT_EQ(back.stats.torn + back.stats.corrupt, 0u);
}

TEST(TrajectoryRecorderTest, ReopenStartsANewSegmentAfterTheHighest) {
  TempDir dir;
  {
    auto recorder = OpenOrFail(dir.path());
    ASSERT_NE(recorder, nullptr);
    recorder->Submit(1, TokenLine(1));
    recorder->Submit(2, TokenLine(2));
  }  // the destructor closes
  const std::string first = ReadText(dir.path() / "segment-000001.jsonl");
  ASSERT_EQ(Lines(first).size(), 2u);
  {
    auto recorder = OpenOrFail(dir.path());
    ASSERT_NE(recorder, nullptr);
    EXPECT_EQ(recorder->stats().segment, dir.path() / "segment-000002.jsonl");
    recorder->Submit(3, TokenLine(3));
  }
  EXPECT_EQ(ReadText(dir.path() / "segment-000001.jsonl"), first) << "an old segment was appended to";
  EXPECT_EQ(ReadText(dir.path() / "segment-000002.jsonl"), TokenLine(3) + "\n");

  // A gap in the numbering (segments deleted or written by someone else): continue after the highest.
  WriteText(dir.path() / "segment-000009.jsonl", TokenLine(9) + "\n");
  {
    auto recorder = OpenOrFail(dir.path());
    ASSERT_NE(recorder, nullptr);
    recorder->Submit(10, TokenLine(10));
  }
  EXPECT_EQ(ReadText(dir.path() / "segment-000010.jsonl"), TokenLine(10) + "\n");
  const ReadBack back = ReadAll(dir.path());
  std::vector<uint64_t> tokens;
  for (const json& r : back.records) tokens.push_back(r["token"].get<uint64_t>());
  EXPECT_EQ(tokens, (std::vector<uint64_t>{1, 2, 3, 9, 10}));
}

TEST(TrajectoryRecorderTest, AnUnusedSegmentIsRemovedOnClose) {
  TempDir dir;
  {
    auto recorder = OpenOrFail(dir.path());
    ASSERT_NE(recorder, nullptr);
    EXPECT_TRUE(fs::exists(dir.path() / "segment-000001.jsonl"));  // created at Open: errors show early
  }
  EXPECT_FALSE(fs::exists(dir.path() / "segment-000001.jsonl"));
}

TEST(TrajectoryRecorderTest, CreatesTheStoreFolder) {
  TempDir dir;
  auto recorder = OpenOrFail(dir.path() / "a" / "b");
  ASSERT_NE(recorder, nullptr);
  recorder->Submit(1, TokenLine(1));
  recorder->Close();
  EXPECT_EQ(ReadText(dir.path() / "a" / "b" / "segment-000001.jsonl"), TokenLine(1) + "\n");
}

TEST(TrajectoryRecorderTest, OpenFailsWithAReasonWhenTheFolderCannotBeCreated) {
  TempDir dir;
  WriteText(dir.path() / "file", "not a folder");
  std::string error;
  EXPECT_EQ(TrajectoryRecorder::Open(dir.path() / "file" / "store", {}, error), nullptr);
  EXPECT_NE(error.find("file/store"), std::string::npos) << error;

  error.clear();
  RecorderOptions zero;
  zero.max_batch = 0;
  EXPECT_EQ(TrajectoryRecorder::Open(dir.path() / "store", zero, error), nullptr);
  EXPECT_NE(error.find("max_batch"), std::string::npos) << error;
}

TEST(TrajectoryRecorderTest, RefusedRecordsComeBackAsFailedTokens) {
  TempDir dir;
  auto recorder = OpenOrFail(dir.path());
  ASSERT_NE(recorder, nullptr);
  recorder->Submit(1, "{\"a\":1}\n{\"b\":2}");  // two lines in one record: a caller's bug
  recorder->Submit(2, "");
  recorder->Submit(3, TokenLine(3));
  recorder->Close();
  recorder->Submit(4, TokenLine(4));  // after Close

  pollfd p{recorder->notify_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 1);
  EXPECT_EQ(recorder->TakeDurable(), (std::vector<uint64_t>{3}));
  const std::vector<FailedRecord> failed = recorder->TakeFailed();
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_EQ(failed[0].token, 1u);
  EXPECT_NE(failed[0].error.find("newline"), std::string::npos) << failed[0].error;
  EXPECT_EQ(failed[1].token, 2u);
  EXPECT_EQ(failed[2].token, 4u);
  EXPECT_NE(failed[2].error.find("closed"), std::string::npos) << failed[2].error;
  EXPECT_EQ(recorder->stats().failed, 3u);
  EXPECT_TRUE(recorder->healthy()) << "a caller's bad line says nothing about the disk";
  EXPECT_EQ(ReadText(dir.path() / "segment-000001.jsonl"), TokenLine(3) + "\n");
}

// ---------------------------------------------------------------------------------------------
// Reader

TEST(TrajectoryReaderTest, SkipsATornLastLineAndCountsIt) {
  TempDir dir;
  WriteText(dir.path() / "segment-000001.jsonl", "{\"n\":1}\n{\"n\":2}\n{\"kind\":\"transi");
  WriteText(dir.path() / "segment-000002.jsonl", "{\"n\":3}\n");
  const ReadBack back = ReadAll(dir.path());
  ASSERT_EQ(back.records.size(), 3u);
  EXPECT_EQ(back.records[2]["n"], 3);
  EXPECT_EQ(back.stats.torn, 1u);
  EXPECT_EQ(back.stats.corrupt, 0u);
  EXPECT_EQ(back.stats.records, 3u);
  EXPECT_EQ(back.stats.segments, 2u);
  EXPECT_EQ(back.stats.bytes, 8u + 8u + 15u + 8u);
  ASSERT_EQ(back.stats.problems.size(), 1u);
  EXPECT_TRUE(back.stats.problems[0].torn);
  EXPECT_EQ(back.stats.problems[0].line, 3u);
  EXPECT_NE(back.stats.problems[0].Describe().find("segment-000001.jsonl:3: torn last line"), std::string::npos)
      << back.stats.problems[0].Describe();
}

TEST(TrajectoryReaderTest, ACompleteObjectWithoutItsNewlineIsStillTorn) {
  // The recorder never acknowledged it: its write stopped one byte short.
  TempDir dir;
  WriteText(dir.path() / "segment-000001.jsonl", "{\"n\":1}\n{\"n\":2}");
  const ReadBack back = ReadAll(dir.path());
  ASSERT_EQ(back.records.size(), 1u);
  EXPECT_EQ(back.stats.torn, 1u);
  EXPECT_EQ(back.stats.corrupt, 0u);
}

TEST(TrajectoryReaderTest, ReportsCorruptLinesWithFileAndLineAndReadsOn) {
  TempDir dir;
  WriteText(dir.path() / "segment-000001.jsonl", "{\"n\":1}\nnot json\n[1,2]\n\n{\"n\":2}\n");
  const ReadBack back = ReadAll(dir.path());
  ASSERT_EQ(back.records.size(), 2u);
  EXPECT_EQ(back.records[1]["n"], 2);
  EXPECT_EQ(back.stats.corrupt, 3u);
  EXPECT_EQ(back.stats.torn, 0u);
  ASSERT_EQ(back.stats.problems.size(), 3u);
  EXPECT_EQ(back.stats.problems[0].line, 2u);
  EXPECT_FALSE(back.stats.problems[0].torn);
  EXPECT_NE(back.stats.problems[0].Describe().find("segment-000001.jsonl:2: corrupt line"), std::string::npos)
      << back.stats.problems[0].Describe();
  EXPECT_NE(back.stats.problems[1].message.find("array"), std::string::npos) << back.stats.problems[1].message;
  EXPECT_EQ(back.stats.problems[2].line, 4u);
}

TEST(TrajectoryReaderTest, EmptySegmentsAndAMissingStore) {
  TempDir dir;
  WriteText(dir.path() / "segment-000001.jsonl", "");
  WriteText(dir.path() / "segment-000002.jsonl", "{\"n\":1}\n");
  const ReadBack back = ReadAll(dir.path());
  EXPECT_EQ(back.records.size(), 1u);
  EXPECT_EQ(back.stats.segments, 2u);

  TrajectoryReader missing(dir.path() / "missing");
  EXPECT_FALSE(missing.ok());
  json record;
  EXPECT_FALSE(missing.Next(record));
}

TEST(TrajectoryReaderTest, SaysWhereEachRecordCameFrom) {
  TempDir dir;
  WriteText(dir.path() / "segment-000001.jsonl", "{\"n\":1}\n{\"n\":2}\n");
  WriteText(dir.path() / "segment-000002.jsonl", "{\"n\":3}\n");
  TrajectoryReader reader(dir.path());
  json record;
  ASSERT_TRUE(reader.Next(record));
  ASSERT_TRUE(reader.Next(record));
  EXPECT_EQ(reader.segment().filename(), "segment-000001.jsonl");
  EXPECT_EQ(reader.line(), 2u);
  ASSERT_TRUE(reader.Next(record));
  EXPECT_EQ(reader.segment().filename(), "segment-000002.jsonl");
  EXPECT_EQ(reader.line(), 1u);
  EXPECT_FALSE(reader.Next(record));
}

// ---------------------------------------------------------------------------------------------
// A small store as the server writes it: one episode of four steps on one task, one of two on
// another.

json Observation(int step, const std::string& status, double speedup, double best, const std::string& source) {
  return {{"step", step},
          {"status", status},
          {"stage", status == "ok" ? "done" : "compile"},
          {"message", status == "ok" ? "" : "error: expected ';'"},
          {"action_error", ""},
          {"reused", false},
          {"speedup", speedup},
          {"speedup_ci_low", speedup * 0.95},
          {"speedup_ci_high", speedup * 1.05},
          {"best_speedup", best},
          {"steps_left", 10 - step},
          {"seconds_left", 100.0 - step},
          {"source", source},
          {"report", {{"status", status}, {"seconds", 0.25 + step}}},
          {"text", "## step " + std::to_string(step) + " (" + status + ")"},
          {"features", {1.0, 2.0}}};
}

json Reset(const std::string& episode, const std::string& task, uint64_t seed, const json& observation) {
  return {{"kind", "reset"},
          {"time", 1700000000.5},
          {"versions", {{"kernelgym", "0.1.0"}, {"protocol", 1}}},
          {"env", "env-" + episode},
          {"episode", episode},
          {"task", task},
          {"backend", "cpu"},
          {"seed", seed},
          {"step", 0},
          {"observation", observation},
          {"runner", {{"host", "test"}}},
          {"timing_samples", json::array()}};
}

json Transition(const json& reset, int step, const json& action, const std::string& prompt, const json& observation,
                double reward, bool terminated = false) {
  json t = reset;
  t["kind"] = "transition";
  t["step"] = step;
  t["observation"] = observation;
  t["action"] = action;
  t["prompt"] = prompt;
  t["reward"] = reward;
  t["terminated"] = terminated;
  t["truncated"] = false;
  t["timing_samples"] = json::array({{{"reference_ns", 100}, {"candidate_ns", 50}}});
  return t;
}

struct SmallStore {
  std::vector<json> records;
};

SmallStore MakeSmallStore() {
  SmallStore s;
  const json r1 = Reset("ep1", "cpu/softmax", 42, Observation(0, "ok", 1.0, 1.0, "starter"));
  s.records.push_back(r1);
  s.records.push_back(Transition(r1, 1, {{"kind", "replace"}, {"source", "int a;"}}, "## step 0 (ok)",
                                 Observation(1, "ok", 2.0, 2.0, "int a;"), 0.5));
  s.records.push_back(Transition(r1, 2, {{"kind", "edit"}, {"edits", {{{"search", "a"}, {"replace", "b"}}}}},
                                 "## step 1 (ok)", Observation(2, "compile_error", 0.0, 2.0, "int b"), -1.0));
  s.records.push_back(Transition(r1, 3, {{"kind", "patch"}, {"diff", "--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n"}},
                                 "## step 2 (compile_error)", Observation(3, "ok", 3.0, 3.0, "int c;"), 0.25));
  s.records.push_back(Transition(r1, 4, {{"kind", "submit"}}, "## step 3 (ok)",
                                 Observation(4, "ok", 3.0, 3.0, "int c;"), 0.0, /*terminated=*/true));
  const json r2 = Reset("ep2", "cpu/gemm", 7, Observation(0, "ok", 1.0, 1.0, "gemm starter"));
  s.records.push_back(r2);
  s.records.push_back(Transition(r2, 1, {{"kind", "knobs"}, {"values", {{"tile", 64}}}}, "## gemm step 0",
                                 Observation(1, "ok", 1.5, 1.5, "gemm tiled"), 0.75));
  s.records.push_back(Transition(r2, 2, {{"kind", "revert"}, {"to_step", 0}}, "## gemm step 1",
                                 Observation(2, "ok", 1.0, 1.5, "gemm starter"), -0.5));
  return s;
}

void WriteStore(const fs::path& dir, const SmallStore& store) {
  auto recorder = OpenOrFail(dir);
  ASSERT_NE(recorder, nullptr);
  uint64_t token = 0;
  for (const json& record : store.records) recorder->Submit(token++, record.dump());
  recorder->Close();
  ASSERT_EQ(recorder->TakeDurable().size(), store.records.size());
}

std::vector<json> ParseLines(const std::string& text) {
  std::vector<json> rows;
  for (const std::string& line : Lines(text)) rows.push_back(json::parse(line));
  return rows;
}

TEST(TrajectoryExportTest, TransitionsAreFlatRowsWithEveryDocumentedColumn) {
  TempDir dir;
  const SmallStore store = MakeSmallStore();
  WriteStore(dir.path(), store);
  TrajectoryReader reader(dir.path());
  std::ostringstream out;
  const ExportSummary summary = ExportRecords(reader, ExportFormat::kTransitions, out);
  EXPECT_EQ(summary.records, 8u);
  EXPECT_EQ(summary.rows, 6u);

  const std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 6u);
  // Columns in the documented order (ordered_json keeps it through dump()).
  EXPECT_EQ(
      lines[0].substr(0, lines[0].find(",\"action_kind\"")),
      "{\"env\":\"env-ep1\",\"episode\":\"ep1\",\"task\":\"cpu/softmax\",\"backend\":\"cpu\",\"seed\":42,\"step\":1");

  const std::vector<json> rows = ParseLines(out.str());
  const json expected_first = {{"env", "env-ep1"},
                               {"episode", "ep1"},
                               {"task", "cpu/softmax"},
                               {"backend", "cpu"},
                               {"seed", 42},
                               {"step", 1},
                               {"action_kind", "replace"},
                               {"action", "{\"kind\":\"replace\",\"source\":\"int a;\"}"},
                               {"status", "ok"},
                               {"speedup", 2.0},
                               {"best_speedup", 2.0},
                               {"reward", 0.5},
                               {"terminated", false},
                               {"truncated", false},
                               {"reused", false},
                               {"eval_seconds", 1.25},
                               {"prompt", "## step 0 (ok)"},
                               {"source", "int a;"}};
  EXPECT_EQ(rows[0], expected_first);

  std::vector<std::string> kinds;
  for (const json& row : rows) {
    EXPECT_EQ(row.size(), 18u) << row.dump();
    EXPECT_TRUE(row["action"].is_string()) << "the action column must be uniform";
    kinds.push_back(row["action_kind"]);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"replace", "edit", "patch", "submit", "knobs", "revert"}));
  EXPECT_EQ(rows[1]["status"], "compile_error");
  EXPECT_EQ(rows[1]["reward"], -1.0);
  EXPECT_EQ(rows[3]["terminated"], true);
  EXPECT_EQ(rows[4]["action"], "{\"kind\":\"knobs\",\"values\":{\"tile\":64}}");
  EXPECT_EQ(rows[4]["seed"], 7);
}

TEST(TrajectoryExportTest, TransitionRowWritesNullForMissingFields) {
  const json bare = {{"kind", "transition"}, {"task", "t"}};
  const std::optional<nlohmann::ordered_json> row = TransitionRow(bare);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->size(), 18u);
  EXPECT_EQ((*row)["task"], "t");
  EXPECT_TRUE((*row)["action"].is_null());
  EXPECT_TRUE((*row)["eval_seconds"].is_null());
  EXPECT_TRUE((*row)["status"].is_null());
  EXPECT_FALSE(TransitionRow(json{{"kind", "reset"}}).has_value());
  EXPECT_FALSE(TransitionRow(json::array()).has_value());
}

TEST(TrajectoryExportTest, SftKeepsImprovingStepsAsChatMessages) {
  TempDir dir;
  WriteStore(dir.path(), MakeSmallStore());
  TrajectoryReader reader(dir.path());
  std::ostringstream out;
  const ExportSummary summary = ExportRecords(reader, ExportFormat::kSft, out);
  // Kept: ep1 step 1 (ok, +0.5), ep1 step 3 (ok, +0.25), ep2 step 1 (ok, +0.75). Dropped: the
  // compile error, the submit (reward 0), the revert (reward < 0), the resets.
  EXPECT_EQ(summary.rows, 3u);
  const std::vector<json> rows = ParseLines(out.str());
  ASSERT_EQ(rows.size(), 3u);
  const json expected_first = {{"messages",
                                {{{"role", "user"}, {"content", "## step 0 (ok)"}},
                                 {{"role", "assistant"}, {"content", "```cpp\nint a;\n```"}}}},
                               {"task", "cpu/softmax"},
                               {"reward", 0.5},
                               {"speedup", 2.0}};
  EXPECT_EQ(rows[0], expected_first);
  EXPECT_EQ(rows[1]["messages"][1]["content"], "```diff\n--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n```");
  EXPECT_EQ(rows[1]["messages"][0]["content"], "## step 2 (compile_error)");
  EXPECT_EQ(rows[2]["messages"][1]["content"], "{\"kind\":\"knobs\",\"values\":{\"tile\":64}}");
  EXPECT_EQ(rows[2]["task"], "cpu/gemm");
  EXPECT_EQ(rows[2]["speedup"], 1.5);
}

TEST(TrajectoryExportTest, SftSkipsTransitionsWithoutAPromptOrARenderableAction) {
  const json reset = Reset("e", "t", 1, Observation(0, "ok", 1, 1, "s"));
  EXPECT_TRUE(SftExample(Transition(reset, 1, {{"kind", "submit"}}, "p", Observation(1, "ok", 2, 2, "s"), 1.0)));
  EXPECT_FALSE(SftExample(Transition(reset, 1, {{"kind", "submit"}}, "", Observation(1, "ok", 2, 2, "s"), 1.0)));
  EXPECT_FALSE(SftExample(Transition(reset, 1, {{"kind", "teleport"}}, "p", Observation(1, "ok", 2, 2, "s"), 1.0)));
  EXPECT_FALSE(SftExample(Transition(reset, 1, {{"kind", "replace"}}, "p", Observation(1, "ok", 2, 2, "s"), 1.0)));
  EXPECT_FALSE(
      SftExample(Transition(reset, 1, {{"kind", "submit"}}, "p", Observation(1, "incorrect", 0, 2, "s"), 1.0)));
  json no_reward = Transition(reset, 1, {{"kind", "submit"}}, "p", Observation(1, "ok", 2, 2, "s"), 1.0);
  no_reward.erase("reward");
  EXPECT_FALSE(SftExample(no_reward));
  EXPECT_FALSE(SftExample(reset));
}

// The chat format: each usable LLM exchange in a step's meta becomes one conversation ending in
// the model's completion; failed calls and unusable replies are left out.
TEST(TrajectoryExportTest, ChatExportsTheUsableExchangesOfAStepsMeta) {
  const json reset = Reset("e", "cpu/softmax", 1, Observation(0, "ok", 1, 1, "s"));
  json step = Transition(reset, 1, {{"kind", "replace"}, {"source", "int a;"}}, "p", Observation(1, "ok", 2, 2, "s"), 0.5);
  auto exchange = [](const std::string& role, const std::string& completion, const std::string& status) {
    return json{{"role", role},
                {"messages", {{{"role", "system"}, {"content", "sys " + role}}, {{"role", "user"}, {"content", "task"}}}},
                {"completion", completion},
                {"status", status}};
  };
  json unusable = exchange("implementer", "no code here", "ok");
  unusable["parse_error"] = "no code";
  step["meta"] = {{"policy", "kernelgym-agent"},
                  {"exchanges", {exchange("planner", "## Analysis ...", "ok"), unusable,
                                 exchange("implementer", "```cpp\nint a;\n```", "ok"),
                                 exchange("debugger", "", "timeout")}}};
  const std::vector<nlohmann::ordered_json> rows = ChatExamples(step);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["role"], "planner");
  EXPECT_EQ(rows[1]["role"], "implementer");
  EXPECT_EQ(rows[1]["messages"].size(), 3u);
  EXPECT_EQ(json(rows[1]["messages"][0]), (json{{"role", "system"}, {"content", "sys implementer"}}));
  EXPECT_EQ(json(rows[1]["messages"][2]), (json{{"role", "assistant"}, {"content", "```cpp\nint a;\n```"}}));
  EXPECT_EQ(rows[1]["reward"], 0.5);
  EXPECT_EQ(rows[1]["status"], "ok");
  EXPECT_EQ(rows[1]["task"], "cpu/softmax");
  // No meta, or a reset: nothing.
  EXPECT_TRUE(ChatExamples(Transition(reset, 1, {{"kind", "submit"}}, "p", Observation(1, "ok", 2, 2, "s"), 1.0)).empty());
  EXPECT_TRUE(ChatExamples(reset).empty());
}

TEST(TrajectoryExportTest, RendersEachActionKindAsAPolicyWouldWriteIt) {
  EXPECT_EQ(RenderActionText({{"kind", "replace"}, {"source", "int x;\n"}}, "cpu"), "```cpp\nint x;\n```");
  EXPECT_EQ(RenderActionText({{"kind", "replace"}, {"source", "def k(): pass"}}, "pallas"),
            "```python\ndef k(): pass\n```");
  EXPECT_EQ(
      RenderActionText(
          {{"kind", "edit"}, {"edits", {{{"search", "a\nb"}, {"replace", "c\n"}}, {{"search", "d"}, {"replace", ""}}}}},
          "cpu"),
      "<<<<<<< SEARCH\na\nb\n=======\nc\n>>>>>>> REPLACE\n"
      "\n"
      "<<<<<<< SEARCH\nd\n=======\n>>>>>>> REPLACE");
  EXPECT_EQ(RenderActionText({{"kind", "patch"}, {"diff", "-a\n+b"}}, "cpu"), "```diff\n-a\n+b\n```");
  EXPECT_EQ(RenderActionText({{"kind", "knobs"}, {"values", {{"unroll", 4}, {"order", "ij"}}}}, "cpu"),
            "{\"kind\":\"knobs\",\"values\":{\"order\":\"ij\",\"unroll\":4}}");
  EXPECT_EQ(RenderActionText({{"kind", "revert"}, {"to_step", 2}}, "cpu"), "{\"kind\":\"revert\",\"to_step\":2}");
  EXPECT_EQ(RenderActionText({{"kind", "submit"}}, "cpu"), "SUBMIT");
  EXPECT_EQ(RenderActionText({{"kind", "edit"}, {"edits", json::array()}}, "cpu"), std::nullopt);
  EXPECT_EQ(RenderActionText({{"kind", "revert"}, {"to_step", "two"}}, "cpu"), std::nullopt);
  EXPECT_EQ(RenderActionText(json(), "cpu"), std::nullopt);
}

TEST(TrajectoryExportTest, FormatNames) {
  EXPECT_EQ(ParseExportFormat("transitions"), ExportFormat::kTransitions);
  EXPECT_EQ(ParseExportFormat("sft"), ExportFormat::kSft);
  EXPECT_EQ(ParseExportFormat("parquet"), std::nullopt);
  EXPECT_EQ(ExportFormatName(ExportFormat::kSft), "sft");
}

// ---------------------------------------------------------------------------------------------
// Stats and the command bodies

TEST(TrajectoryStatsTest, CountsTheSmallStore) {
  TempDir dir;
  WriteStore(dir.path(), MakeSmallStore());
  // A crash's torn tail in an older segment, and a damaged line in the middle of another.
  WriteText(dir.path() / "segment-000005.jsonl", "{\"kind\":\"reset\",\"task\":\"cpu/x\"}\ngarbage\n{\"kind\":\"tr");
  TrajectoryReader reader(dir.path());
  const StoreStats stats = ComputeStoreStats(reader);
  EXPECT_EQ(stats.records, 9u);
  EXPECT_EQ(stats.resets, 3u);
  EXPECT_EQ(stats.transitions, 6u);
  EXPECT_EQ(stats.other_kinds, 0u);
  EXPECT_EQ(stats.episodes, 2u);
  EXPECT_EQ(stats.tasks.size(), 3u);
  EXPECT_EQ(stats.statuses.at("ok"), 7u);
  EXPECT_EQ(stats.statuses.at("compile_error"), 1u);
  EXPECT_EQ(stats.statuses.at(""), 1u);
  ASSERT_TRUE(stats.mean_reward.has_value());
  EXPECT_DOUBLE_EQ(*stats.mean_reward, (0.5 - 1.0 + 0.25 + 0.0 + 0.75 - 0.5) / 6);
  EXPECT_EQ(stats.tasks.at("cpu/softmax").records, 5u);
  EXPECT_EQ(stats.tasks.at("cpu/softmax").best_speedup, 3.0);
  EXPECT_EQ(stats.tasks.at("cpu/gemm").best_speedup, 1.5);
  EXPECT_EQ(stats.tasks.at("cpu/x").best_speedup, std::nullopt);
  EXPECT_EQ(stats.segments, 2u);
  EXPECT_EQ(stats.torn, 1u);
  EXPECT_EQ(stats.corrupt, 1u);
  EXPECT_EQ(stats.bytes,
            fs::file_size(dir.path() / "segment-000001.jsonl") + fs::file_size(dir.path() / "segment-000005.jsonl"));

  const nlohmann::ordered_json j = StoreStatsToJson(stats);
  EXPECT_EQ(j["records"], 9);
  EXPECT_EQ(j["episodes"], 2);
  EXPECT_EQ(j["tasks"], 3);
  EXPECT_EQ(j["statuses"]["compile_error"], 1);
  EXPECT_EQ(j["per_task"]["cpu/gemm"]["best_speedup"], 1.5);
  EXPECT_TRUE(j["per_task"]["cpu/x"]["best_speedup"].is_null());
  EXPECT_EQ(j["torn_lines"], 1);
  EXPECT_EQ(j["corrupt_lines"], 1);
  ASSERT_EQ(j["problems"].size(), 2u);
  EXPECT_NE(j["problems"][0].get<std::string>().find("segment-000005.jsonl:2: corrupt line"), std::string::npos);

  const std::string text = RenderStoreStats(stats);
  EXPECT_NE(text.find("records      9 (3 resets, 6 transitions)"), std::string::npos) << text;
  EXPECT_NE(text.find("  cpu/softmax  5  3x"), std::string::npos) << text;
  EXPECT_NE(text.find("1 torn line(s), 1 corrupt line(s)"), std::string::npos) << text;
}

TEST(TrajectoryStatsTest, AnEmptyStoreHasNoMeanReward) {
  TempDir dir;
  TrajectoryReader reader(dir.path());
  const StoreStats stats = ComputeStoreStats(reader);
  EXPECT_EQ(stats.records, 0u);
  EXPECT_EQ(stats.mean_reward, std::nullopt);
  EXPECT_TRUE(StoreStatsToJson(stats)["mean_reward"].is_null());
}

TEST(DatasetCommandTest, ExportWritesTheFileAndASummary) {
  TempDir dir;
  WriteStore(dir.path() / "store", MakeSmallStore());
  std::ostringstream log;
  const fs::path out = dir.path() / "sft.jsonl";
  EXPECT_EQ(RunDatasetExport(dir.path() / "store", "sft", out, log), 0) << log.str();
  EXPECT_EQ(Lines(ReadText(out)).size(), 3u);
  EXPECT_NE(log.str().find("exported 3 sft row(s) from 8 record(s) in 1 segment(s)"), std::string::npos) << log.str();
  // Only the store and the output: no temporary left behind.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"sft.jsonl", "store"}));

  std::ostringstream log2;
  EXPECT_EQ(RunDatasetExport(dir.path() / "store", "transitions", out, log2), 0) << log2.str();
  EXPECT_EQ(Lines(ReadText(out)).size(), 6u) << "the earlier file is replaced";
}

TEST(DatasetCommandTest, ExportRejectsAnUnknownFormatAndAMissingStore) {
  TempDir dir;
  std::ostringstream log;
  EXPECT_EQ(RunDatasetExport(dir.path(), "parquet", dir.path() / "x.jsonl", log), 2);
  EXPECT_NE(log.str().find("unknown export format 'parquet'"), std::string::npos) << log.str();
  EXPECT_EQ(RunDatasetExport(dir.path() / "missing", "sft", dir.path() / "x.jsonl", log), 2);
  EXPECT_NE(log.str().find("missing is not a directory"), std::string::npos) << log.str();
  EXPECT_FALSE(fs::exists(dir.path() / "x.jsonl"));
  EXPECT_EQ(RunDatasetExport(dir.path(), "sft", dir.path() / "no" / "such" / "x.jsonl", log), 1);
}

TEST(DatasetCommandTest, StatsAsTextAndJson) {
  TempDir dir;
  WriteStore(dir.path(), MakeSmallStore());
  std::ostringstream json_out;
  EXPECT_EQ(RunDatasetStats(dir.path(), true, json_out), 0);
  const json j = json::parse(json_out.str());
  EXPECT_EQ(j["records"], 8);
  EXPECT_EQ(j["transitions"], 6);
  EXPECT_EQ(j["segments"], 1);
  std::ostringstream text_out;
  EXPECT_EQ(RunDatasetStats(dir.path(), false, text_out), 0);
  EXPECT_NE(text_out.str().find("episodes     2"), std::string::npos) << text_out.str();
  std::ostringstream none;
  EXPECT_EQ(RunDatasetStats(dir.path() / "missing", false, none), 2);
}

}  // namespace
}  // namespace kernelgym
