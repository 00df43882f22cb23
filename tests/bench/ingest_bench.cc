// Ingest of JSON-lines events: parsers side by side, then the codec's
// decoders, then (with --cepbus PATH) the whole `cepbus match` process.
//
//   ingest_bench [--lines N] [--cepbus PATH]
//
// Two streams: short lines {"type":"A","ts":N} and the cloned-plates readings
// {"type":"Reading","ts":N,"attrs":{"plate":..,"site":..},"prob":..}.
// parse: each parser reads every line and finds "ts" (no event is built):
// nlohmann::json (the reference decoder's parser), simdjson DOM and simdjson
// on-demand, one line at a time from one padded buffer. decode: whole events
// with allocations and bytes per event, through decodeEventReference() (the
// previous path: std::getline + nlohmann), decodeEvent() per line, and
// EventLineReader (block reads + the on-demand fast path).
// cepbus: writes both kinds of files and times `cepbus match --count` of
// SEQ(A a, B b, X x) WITHIN 10 over the short lines (no X: no matches).

#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "tests/bench/alloc_counter.h"

namespace {

using namespace cepbus;
using Clock = std::chrono::steady_clock;

std::string shortLines(size_t n) {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    text +=
        std::string(R"({"type":")") + "AB"[i % 2] + R"(","ts":)" + std::to_string(i + 1) + "}\n";
  }
  return text;
}

std::string plateLines(size_t n) {
  std::string text;
  uint64_t x = 42;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const unsigned plate = static_cast<unsigned>(x >> 40) % 10000000;
    char line[160];
    std::snprintf(line, sizeof line,
                  R"({"type":"Reading","ts":%zu,"attrs":{"plate":"%07u","site":"S%02u"},)"
                  R"("prob":0.%03u})"
                  "\n",
                  i + 1, plate, static_cast<unsigned>(x >> 20) % 40,
                  750 + static_cast<unsigned>(x >> 10) % 250);
    text += line;
  }
  return text;
}

std::vector<std::string_view> splitLines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    lines.emplace_back(text.data() + at, nl - at);
    at = nl + 1;
  }
  return lines;
}

void print(const char* bench, const char* stream, const char* method, size_t lines, double s,
           uint64_t check, const std::string& extra = "") {
  std::printf(
      R"({"bench":"%s","params":{"stream":"%s","method":"%s","lines":%zu},"lines_per_s":%.0f,"seconds":%.4f,"check":%llu%s})"
      "\n",
      bench, stream, method, lines, lines / s, s, static_cast<unsigned long long>(check),
      extra.c_str());
  std::fflush(stdout);
}

template <typename F>
double timed(F&& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void parsers(const char* stream, const std::string& text) {
  const std::vector<std::string_view> lines = splitLines(text);
  // The lines stay in the padded text: simdjson may read past each line.
  const simdjson::padded_string padded(text);
  const std::vector<std::string_view> in_padded = splitLines(std::string(padded));
  uint64_t sum = 0;
  double s = timed([&] {
    for (std::string_view line : lines) sum += nlohmann::json::parse(line)["ts"].get<int64_t>();
  });
  print("ingest_parse", stream, "nlohmann", lines.size(), s, sum);

  simdjson::dom::parser dom;
  sum = 0;
  s = timed([&] {
    for (std::string_view line : lines) {
      const size_t offset = line.data() - text.data();
      sum += int64_t(dom.parse(padded.data() + offset, line.size(), false)["ts"]);
    }
  });
  print("ingest_parse", stream, "simdjson_dom", lines.size(), s, sum);

  simdjson::ondemand::parser od;
  sum = 0;
  s = timed([&] {
    for (std::string_view line : lines) {
      const size_t offset = line.data() - text.data();
      simdjson::ondemand::document doc = od.iterate(
          padded.data() + offset, line.size(), padded.size() + simdjson::SIMDJSON_PADDING - offset);
      sum += int64_t(doc["ts"]);
    }
  });
  print("ingest_parse", stream, "simdjson_ondemand", lines.size(), s, sum);
}

// The last kBatch events decoded (a replay batch, bus/app/event_replay.h).
class Batch {
 public:
  static constexpr size_t kBatch = 256;
  Batch() { events_.reserve(kBatch); }
  void push_back(EventPtr e) {
    if (events_.size() == kBatch) events_.clear();
    events_.push_back(std::move(e));
  }
  const EventPtr& back() const { return events_.back(); }

 private:
  std::vector<EventPtr> events_;
};

template <typename F>
void decoded(const char* stream, const char* method, size_t n, F&& f) {
  const uint64_t allocs = bench::allocationCount();
  const uint64_t bytes = bench::allocatedBytes();
  uint64_t sum = 0;
  // The events of one replay batch stay alive, as `cepbus match` holds them.
  Batch keep;
  const double s = timed([&] { sum = f(keep); });
  char extra[128];
  std::snprintf(extra, sizeof extra, R"(,"allocs_per_event":%.2f,"bytes_per_event":%.1f)",
                double(bench::allocationCount() - allocs) / n,
                double(bench::allocatedBytes() - bytes) / n);
  print("ingest_decode", stream, method, n, s, sum, extra);
}

void decoders(const char* stream, const std::string& text) {
  const std::vector<std::string_view> lines = splitLines(text);
  const size_t n = lines.size();
  // The streams are filled before the clock starts: copying the text is not reading it.
  std::istringstream reference_in(text);
  std::istringstream reader_in(text);
  decoded(stream, "reference_getline_nlohmann", n, [&](Batch& keep) {
    std::istream& in = reference_in;
    std::string line;
    uint64_t sum = 0;
    while (std::getline(in, line)) {
      keep.push_back(*decodeEventReference(line));
      sum += keep.back()->ts();
    }
    return sum;
  });
  decoded(stream, "decodeEvent_per_line", n, [&](Batch& keep) {
    uint64_t sum = 0;
    for (std::string_view line : lines) {
      keep.push_back(*decodeEvent(line));
      sum += keep.back()->ts();
    }
    return sum;
  });
  decoded(stream, "EventLineReader", n, [&](Batch& keep) {
    EventLineReader reader(reader_in);
    uint64_t sum = 0;
    for (Result<EventPtr> e = reader.next(); e; e = reader.next()) {
      keep.push_back(std::move(*e));
      sum += keep.back()->ts();
    }
    return sum;
  });
}

void wholeProcess(const std::string& cepbus, const char* stream, const std::string& text,
                  const std::string& query) {
  const std::string file = std::string("/tmp/ingest_bench_") + stream + ".jsonl";
  std::ofstream(file) << text;
  const std::string cmd = "'" + cepbus + "' match --engine nfa --query '" + query + "' --events " +
                          file + " --count > /dev/null";
  const size_t n = splitLines(text).size();
  int rc = 0;
  const double s = timed([&] { rc = std::system(cmd.c_str()); });
  print("ingest_cepbus_match", stream, "cepbus_match_count", n, s, static_cast<uint64_t>(rc),
        R"(,"query":")" + query + "\"");
  std::remove(file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 1000000;
  std::string cepbus;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--lines") n = std::stoul(argv[i + 1]);
    if (flag == "--cepbus") cepbus = argv[i + 1];
  }
  const std::string short_text = shortLines(n);
  const std::string plate_text = plateLines(n);
  // Warm the symbol table as a replay's first line does.
  (void)decodeEvent(R"({"type":"A","ts":0})");
  (void)decodeEvent(R"({"type":"B","ts":0})");
  (void)decodeEvent(R"({"type":"Reading","ts":0,"attrs":{"plate":"","site":""}})");
  parsers("short", short_text);
  parsers("plates", plate_text);
  decoders("short", short_text);
  decoders("plates", plate_text);
  if (!cepbus.empty()) {
    wholeProcess(cepbus, "short", short_text, "PATTERN SEQ(A a, B b, X x) WITHIN 10");
    wholeProcess(cepbus, "plates", plate_text, "PATTERN SEQ(Reading a, Reading b, X x) WITHIN 10");
  }
  return 0;
}
