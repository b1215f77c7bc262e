// carflow view: what view.cc (the command, the page) and view_trace.cc
// (reading Chrome trace-event files) share.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace carflow::cli {

using Json = nlohmann::json;

// Most events a trace may hold: the page keeps them all in memory and
// draws them on every frame.
inline constexpr size_t kMaxTraceEvents = 1'000'000;

// What `carflow view` was given. A graph file as carflow writes it starts
// with {"schema"; a trace is an array of events or an object holding
// "traceEvents" (Chrome's Trace Event Format); anything else is taken for a
// graph, so the graph loader names what is wrong with it.
enum class InputKind { Graph, Trace };
// The kind of the file at `path`; for a trace, *text is its content. false
// with *error when the file cannot be read.
bool input_kind(const std::string& path, InputKind* kind, std::string* text, std::string* error);

// The events of a trace document as the page's timeline reads them:
// {"events": [complete and instant events], "flows": [...], "processes",
// "threads" (names from metadata events), "skipped" (events of other
// phases)}. B/E pairs become complete events. false with *error naming the
// JSON path and the rule ("traceEvents[3].dur: not a number >= 0").
bool trace_page_data(const std::string& text, Json* out, std::string* error);

}  // namespace carflow::cli
