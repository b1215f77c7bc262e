// carflow view: telling a trace from a graph file, and reading Chrome's
// Trace Event Format ("Trace Event Format", Google, the JSON Object and JSON
// Array forms) into what the page's timeline draws. Input is hostile until
// checked: every field the page uses is checked for presence and type.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "graph/json.h"
#include "tools/cli/view.h"

namespace carflow::cli {
namespace {

// Trace events nest a few levels (args may hold objects); nlohmann's dump
// recurses per level, so depth is bounded on the raw text first.
constexpr size_t kMaxNesting = 64;

bool fail(std::string* error, const std::string& message) {
  *error = message;
  return false;
}


// At most `limit` bytes; the limit is checked while reading, so pipes and
// devices cannot run it over.
bool read_file(const std::string& path, size_t limit, std::string* text, std::string* error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return fail(error, path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<char> chunk(1 << 16);
  while (file.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || file.gcount() > 0) {
    text->append(chunk.data(), static_cast<size_t>(file.gcount()));
    if (text->size() > limit) return fail(error, path + ": larger than the limit of " + std::to_string(limit >> 20) + " MiB");
  }
  if (file.bad()) return fail(error, path + ": read failed (" + std::strerror(errno) + ")");
  return true;
}

// The checks of one event, each naming `at` (the event's JSON path).
struct EventReader {
  const Json& event;
  std::string at;
  std::string* error;

  bool field_fails(const char* key, const std::string& rule) const {
    return fail(error, at + "." + key + ": " + rule);
  }
  // pid / tid: an integer or a string (both occur in the wild).
  bool id(const char* key, Json* out) const {
    auto it = event.find(key);
    if (it == event.end()) return field_fails(key, "missing");
    if (!it->is_number_integer() && !it->is_string()) return field_fails(key, "not an integer or a string");
    *out = *it;
    return true;
  }
  bool time(const char* key, double* out) const {
    auto it = event.find(key);
    if (it == event.end()) return field_fails(key, "missing");
    if (!it->is_number() || !std::isfinite(it->get<double>())) return field_fails(key, "not a number");
    *out = it->get<double>();
    if (*out < 0 && std::strcmp(key, "dur") == 0) return field_fails(key, "not a number >= 0");
    return true;
  }
  // An optional string field; "" when absent.
  bool text(const char* key, std::string* out) const {
    auto it = event.find(key);
    if (it == event.end()) return true;
    if (!it->is_string()) return field_fails(key, "not a string");
    *out = it->get<std::string>();
    return true;
  }
  // What every drawn event has: name, cat, pid, tid, ts, and args if given.
  bool common(Json* out, double* ts) const {
    std::string name, cat;
    Json pid, tid;
    if (!text("name", &name) || !text("cat", &cat) || !id("pid", &pid) || !id("tid", &tid) || !time("ts", ts)) {
      return false;
    }
    *out = {{"name", name}, {"cat", cat}, {"pid", pid}, {"tid", tid}, {"ts", *ts}};
    auto args = event.find("args");
    if (args != event.end()) {
      if (!args->is_object()) return field_fails("args", "not an object");
      (*out)["args"] = *args;
    }
    return true;
  }
};

std::string id_key(const Json& id) { return id.is_string() ? id.get<std::string>() : id.dump(); }

// Metadata events name processes and threads (process_name, thread_name).
bool read_metadata(const EventReader& r, Json* page) {
  std::string kind;
  if (!r.text("name", &kind)) return false;
  if (kind != "process_name" && kind != "thread_name") return true;
  Json pid, tid;
  auto args = r.event.find("args");
  if (args == r.event.end() || !args->is_object() || !args->contains("name") || !(*args)["name"].is_string()) {
    return r.field_fails("args", "a " + kind + " event needs args.name, a string");
  }
  if (!r.id("pid", &pid)) return false;
  if (kind == "process_name") {
    (*page)["processes"][id_key(pid)] = (*args)["name"];
    return true;
  }
  if (!r.id("tid", &tid)) return false;
  (*page)["threads"][id_key(pid) + ":" + id_key(tid)] = (*args)["name"];
  return true;
}

// B/E pairs on one thread nest like a stack ("Duration Events").
struct OpenSlices {
  std::map<std::string, std::vector<Json>> by_thread;
  double last_ts = 0;

  bool end(const EventReader& r, double ts, Json* events) {
    Json pid, tid;
    if (!r.id("pid", &pid) || !r.id("tid", &tid)) return false;
    auto& open = by_thread[id_key(pid) + ":" + id_key(tid)];
    if (open.empty()) return fail(r.error, r.at + ": an E event with no B event open on its thread");
    Json slice = std::move(open.back());
    open.pop_back();
    const double begin = slice["ts"].get<double>();
    if (ts < begin) return r.field_fails("ts", "before its B event's ts");
    slice["dur"] = ts - begin;
    events->push_back(std::move(slice));
    return true;
  }
  // Slices still open when the trace ends (a process that hung or died)
  // last until its last timestamp.
  void close_all(Json* events) {
    for (auto& [thread, open] : by_thread) {
      for (Json& slice : open) {
        slice["dur"] = std::max(0.0, last_ts - slice["ts"].get<double>());
        events->push_back(std::move(slice));
      }
    }
  }
};

bool read_event(const Json& event, const std::string& at, Json* page, OpenSlices* open, std::string* error) {
  if (!event.is_object()) return fail(error, at + ": not an object");
  const EventReader r{event, at, error};
  auto ph_it = event.find("ph");
  if (ph_it == event.end() || !ph_it->is_string()) return r.field_fails("ph", "missing or not a string");
  const std::string ph = ph_it->get<std::string>();
  if (ph == "M") return read_metadata(r, page);
  Json out;
  double ts = 0, dur = 0;
  if (ph == "X" || ph == "B" || ph == "E" || ph == "i" || ph == "I" || ph == "s" || ph == "t" || ph == "f") {
    if (ph != "E" && !r.common(&out, &ts)) return false;
    if (ph == "E" && !r.time("ts", &ts)) return false;
    open->last_ts = std::max(open->last_ts, ts);
  }
  if (ph == "X") {
    if (!r.time("dur", &dur)) return false;
    out["ph"] = "X";
    out["dur"] = dur;
    open->last_ts = std::max(open->last_ts, ts + dur);
    (*page)["events"].push_back(std::move(out));
  } else if (ph == "B") {
    out["ph"] = "X";
    open->by_thread[id_key(out["pid"]) + ":" + id_key(out["tid"])].push_back(std::move(out));
  } else if (ph == "E") {
    return open->end(r, ts, &(*page)["events"]);
  } else if (ph == "i" || ph == "I") {
    out["ph"] = "i";
    out["dur"] = 0;
    (*page)["events"].push_back(std::move(out));
  } else if (ph == "s" || ph == "t" || ph == "f") {
    auto id = event.find("id");
    if (id == event.end() || (!id->is_number_integer() && !id->is_string())) {
      return r.field_fails("id", "missing, or not an integer or a string");
    }
    out["ph"] = ph;
    out["id"] = *id;
    out.erase("args");
    (*page)["flows"].push_back(std::move(out));
  } else {
    (*page)["skipped"] = (*page)["skipped"].get<uint64_t>() + 1;
  }
  return true;
}

}  // namespace

bool input_kind(const std::string& path, InputKind* kind, std::string* text, std::string* error) {
  *kind = InputKind::Graph;
  std::ifstream file(path, std::ios::binary);
  if (!file) return fail(error, path + ": cannot open (" + std::strerror(errno) + ")");
  std::string head(4096, '\0');
  file.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(file.gcount()));
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return true;  // the graph loader names the problem
  if (head[first] == '{') {
    const size_t key = head.find_first_not_of(" \t\r\n", first + 1);
    if (key != std::string::npos && head.compare(key, 8, "\"schema\"") == 0) return true;
  } else if (head[first] != '[') {
    return true;
  }
  if (!read_file(path, kMaxGraphDocumentBytes, text, error)) return false;
  if (!json_nesting_ok(*text, kMaxNesting)) return true;
  const Json doc = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_array() || (doc.is_object() && doc.contains("traceEvents"))) {
    *kind = InputKind::Trace;
  } else {
    text->clear();
  }
  return true;
}

bool trace_page_data(const std::string& text, Json* out, std::string* error) {
  if (!json_nesting_ok(text, kMaxNesting)) return fail(error, "document: nests deeper than " + std::to_string(kMaxNesting) + " levels");
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::exception& e) {
    return fail(error, std::string("not valid JSON: ") + e.what());
  }
  const bool array_form = doc.is_array();
  const std::string prefix = array_form ? "" : "traceEvents";
  const Json& events = array_form ? doc : doc["traceEvents"];
  if (!events.is_array()) return fail(error, "traceEvents: not an array");
  if (events.size() > kMaxTraceEvents) {
    return fail(error, prefix + ": " + std::to_string(events.size()) + " events, above the viewer's limit of " +
                           std::to_string(kMaxTraceEvents));
  }
  Json page = {{"events", Json::array()}, {"flows", Json::array()}, {"processes", Json::object()},
               {"threads", Json::object()}, {"skipped", 0}};
  OpenSlices open;
  for (size_t i = 0; i < events.size(); ++i) {
    if (!read_event(events[i], prefix + "[" + std::to_string(i) + "]", &page, &open, error)) return false;
  }
  open.close_all(&page["events"]);
  *out = std::move(page);
  return true;
}

}  // namespace carflow::cli
