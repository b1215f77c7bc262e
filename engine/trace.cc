#include "engine/trace.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/schedule.h"
#include "graph/json.h"

namespace carflow {
namespace {

std::atomic<uint32_t> g_trace_runs{0};  // traced engines this process made

// Microseconds with nanosecond digits, as the trace format counts time.
void put_us(std::string& out, uint64_t ns) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%llu.%03llu", static_cast<unsigned long long>(ns / 1000),
                static_cast<unsigned long long>(ns % 1000));
  out += buf;
}

// JSON string contents: quotes, backslashes and control characters escaped.
std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

bool is_receive(CarKind k) { return k == CarKind::Recv || k == CarKind::RecvReduce; }

}  // namespace

uint32_t next_trace_run() { return g_trace_runs.fetch_add(1); }

uint64_t trace_flow_id(uint32_t run, uint32_t team, uint32_t seq, uint32_t tag, uint32_t sender, uint32_t receiver) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the six words
  for (uint32_t w : {run, team, seq, tag, sender, receiver}) {
    for (int b = 0; b < 4; ++b) {
      h ^= (w >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h & ((uint64_t{1} << 53) - 1);  // exact as a JSON number
}

bool detect_trace_tsc() {
#if defined(__x86_64__)
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  return static_cast<bool>(f >> source) && source == "tsc";
#else
  return false;
#endif
}

ClockAnchor take_clock_anchor() {
  ClockAnchor best;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 32; ++i) {
    const uint64_t before = trace_now(), ns = monotonic_ns(), after = trace_now();
    if (after - before < best_width) {
      best_width = after - before;
      best = {before + (after - before) / 2, ns};
    }
  }
  return best;
}

uint64_t TraceClock::to_ns(uint64_t stamp, const ClockAnchor& end) const {
  if (!kTraceTsc || stamp == 0) return stamp;
  const long double rate = end.stamp > begin_.stamp
                               ? static_cast<long double>(end.ns - begin_.ns) / static_cast<long double>(end.stamp - begin_.stamp)
                               : 1.0L;
  const long double delta = static_cast<long double>(static_cast<int64_t>(stamp - begin_.stamp)) * rate;
  return begin_.ns + static_cast<uint64_t>(static_cast<int64_t>(std::llroundl(delta)));
}

uint64_t TraceClock::duration_ns(uint64_t stamps) const {
  if (!kTraceTsc) return stamps;
  const uint64_t now = trace_now(), ns = monotonic_ns();
  const long double rate = now > begin_.stamp ? static_cast<long double>(ns - begin_.ns) / static_cast<long double>(now - begin_.stamp)
                                              : 1.0L;
  return static_cast<uint64_t>(static_cast<long double>(stamps) * rate);
}

bool write_trace(const std::string& dir, uint32_t node, uint32_t base, uint32_t run,
                 const std::vector<std::unique_ptr<TraceBuffer>>& buffers, const TraceClock& stamps,
                 const ClockEstimate& clock, std::string* path, std::string* error) {
  const ClockAnchor end = take_clock_anchor();
  // Unsigned arithmetic wraps: adding a negative offset subtracts.
  const uint64_t shift = clock.same_clock ? 0 : static_cast<uint64_t>(clock.offset_ns);
  auto ns = [&](uint64_t stamp) { return stamp == 0 ? 0 : stamps.to_ns(stamp, end) + shift; };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  *path = dir + "/carflow-trace-node" + std::to_string(node) + "-run" + std::to_string(run) + ".json";
  const std::string host = escaped(host_name());
  std::string out;
  out.reserve(1 << 20);
  out += "{\"traceEvents\": [\n";
  out += "{\"ph\": \"M\", \"pid\": " + std::to_string(node) +
         ", \"name\": \"process_name\", \"args\": {\"name\": \"node " + std::to_string(node) + " (" + host + ")\"}}";
  uint64_t dropped = 0;
  for (uint32_t i = 0; i < buffers.size(); ++i) {
    const uint32_t image = base + i;
    out += ",\n{\"ph\": \"M\", \"pid\": " + std::to_string(node) + ", \"tid\": " + std::to_string(image) +
           ", \"name\": \"thread_name\", \"args\": {\"name\": \"image " + std::to_string(image) + "\"}}";
    const TraceBuffer& buf = *buffers[i];
    dropped += buf.dropped();
    for (size_t r = 0; r < buf.size(); ++r) {
      const TraceRecord& t = buf[r];
      const uint64_t start = ns(t.start != 0 ? t.start : (t.ready != 0 ? t.ready : t.done));
      const uint64_t ready = t.ready != 0 ? std::min(ns(t.ready), start) : start;
      const uint64_t done = std::max(ns(t.done), start);
      const CollectiveSpec& spec = t.schedule->spec();
      const CarKind kind = t.kind();
      const bool message = kind == CarKind::Send || is_receive(kind);
      const std::string common = "\"pid\": " + std::to_string(node) + ", \"tid\": " + std::to_string(image);
      out += ",\n{\"ph\": \"X\", " + common + ", \"cat\": \"car\", \"name\": \"";
      out += car_kind_name(kind);
      if (message) out += (kind == CarKind::Send ? " to " : " from ") + std::to_string(t.peer);
      out += "\", \"ts\": ";
      put_us(out, start);
      out += ", \"dur\": ";
      put_us(out, done - start);
      out += ", \"args\": {\"kind\": \"" + std::string(car_kind_name(kind)) + "\"";
      if (message) out += ", \"peer\": " + std::to_string(t.peer) + ", \"tag\": " + std::to_string(t.tag);
      out += ", \"bytes\": " + std::to_string(t.bytes()) + ", \"coll\": \"" + coll_kind_name(spec.kind) +
             "\", \"algorithm\": \"" + escaped(spec.algorithm) + "\", \"seq\": " + std::to_string(t.seq) +
             ", \"team\": " + std::to_string(t.team) + ", \"car\": " + std::to_string(t.car) + ", \"ready_us\": ";
      put_us(out, ready);
      out += "}}";
      if (message) {
        const bool send = kind == CarKind::Send;
        const uint64_t id = send ? trace_flow_id(run, t.team, t.seq, t.tag, image, t.peer)
                                 : trace_flow_id(run, t.team, t.seq, t.tag, t.peer, image);
        // The arrow leaves the SEND as it starts and enters the receive at
        // its end, inside its slice (binding point "e": the enclosing one).
        out += ",\n{\"ph\": \"" + std::string(send ? "s" : "f") + "\", " + common +
               ", \"cat\": \"message\", \"name\": \"message\", \"id\": " + std::to_string(id) +
               (send ? "" : ", \"bp\": \"e\"") + ", \"ts\": ";
        put_us(out, send ? start : (done > start ? done - 1 : done));
        out += "}";
      }
    }
  }
  out += "\n],\n\"displayTimeUnit\": \"ns\",\n\"otherData\": {\"format\": \"carflow.trace/1\", \"node\": " +
         std::to_string(node) + ", \"host\": \"" + host + "\", \"run\": " + std::to_string(run) + ", \"clock\": \"CLOCK_MONOTONIC\", \"dropped\": " +
         std::to_string(dropped) + ", \"clock_of_node0\": {\"same_clock\": " + (clock.same_clock ? "true" : "false") +
         ", \"offset_ns\": " + std::to_string(clock.offset_ns) + ", \"error_ns\": " + std::to_string(clock.error_ns) +
         ", \"samples\": " + std::to_string(clock.samples) + ", \"applied\": " + (shift != 0 ? "true" : "false") +
         "}}}\n";
  if (dropped > 0) {
    std::fprintf(stderr, "carflow: CF_TRACE: node %u kept the first CF_TRACE_EVENTS CARs per image; %llu more were "
                 "not recorded\n", node, static_cast<unsigned long long>(dropped));
  }
  const std::string tmp = *path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out;
    if (!f) {
      *error = "CF_TRACE: cannot write " + tmp;
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, *path, ec);
  if (ec) {
    *error = "CF_TRACE: cannot rename " + tmp + ": " + ec.message();
    return false;
  }
  return true;
}

// Trace events nest a few levels (args may hold objects); deeper text is
// refused before parsing (json_nesting_ok, graph/json.h).
constexpr size_t kMaxTraceNesting = 64;

bool merge_traces(const std::string& dir, const std::string& out, size_t* files, size_t* events, std::string* error) {
  using Json = nlohmann::json;
  std::error_code ec;
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("carflow-trace-", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".json") {
      paths.push_back(entry.path());
    }
  }
  if (ec) return *error = dir + ": " + ec.message(), false;
  if (paths.empty()) return *error = dir + ": no carflow-trace-*.json files", false;
  std::sort(paths.begin(), paths.end());
  Json merged = {{"traceEvents", Json::array()}, {"displayTimeUnit", "ns"}, {"otherData", Json::object()}};
  Json sources = Json::array();
  *events = 0;
  for (const auto& p : paths) {
    if (std::filesystem::file_size(p, ec) > (uint64_t{1} << 32)) return *error = p.string() + ": larger than 4 GiB", false;
    std::ifstream in(p, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string body = text.str();
    if (!json_nesting_ok(body, kMaxTraceNesting)) {
      return *error = p.string() + ": nests deeper than " + std::to_string(kMaxTraceNesting) + " levels", false;
    }
    const Json doc = Json::parse(body, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return *error = p.string() + ": not a JSON object", false;
    auto it = doc.find("traceEvents");
    if (it == doc.end() || !it->is_array()) return *error = p.string() + ": traceEvents: missing or not an array", false;
    size_t i = 0;
    for (const Json& e : *it) {
      if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
        return *error = p.string() + ": traceEvents[" + std::to_string(i) + "]: not an event object with a ph", false;
      }
      merged["traceEvents"].push_back(e);
      ++i;
    }
    *events += i;
    auto other = doc.find("otherData");
    sources.push_back(other != doc.end() && other->is_object() ? *other : Json::object());
  }
  merged["otherData"] = {{"format", "carflow.trace/1"}, {"sources", sources}};
  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << merged.dump(1) << "\n";
    if (!f) {
      std::filesystem::remove(tmp, ec);
      return *error = "cannot write " + out, false;
    }
  }
  std::filesystem::rename(tmp, out, ec);
  if (ec) return *error = "cannot write " + out + ": " + ec.message(), false;
  *files = paths.size();
  return true;
}

}  // namespace carflow
