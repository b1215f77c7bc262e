// Graph JSON, schema "carflow.graph/1" (documented in README.md).
//
// Saving then loading gives back an equal GlobalDag, and saving that again
// gives the same text. Loading is hostile-input safe: every field is checked
// for presence, type and range before use, sizes are bounded, and a bad file
// yields false with an error naming the JSON path and the rule
// (e.g. "images[2].cars[5].peer: 9 is not a team rank (P = 8)").
//
// Beyond validate_global, a loadable DAG has: collective.algorithm a
// generator registered for collective.kind (GeneratorRegistry), or
// kHandBuiltAlgorithm; each image's src_bytes / dst_bytes exactly what the
// collective implies (src_extent / dst_extent, graph/layout.h); every other
// buffer size (temp slots, aggregate members) and collective.nbytes below
// 2^48 bytes, the bound check_layout puts on every extent; no string holding
// a control character (U+0000..U+001F, U+007F..U+009F). save_dag_file
// refuses a DAG whose algorithm fails that rule, so a saved file loads.
#pragma once

#include <string>

#include "graph/car.h"

namespace carflow {

// The algorithm of a DAG no registered generator made (assembled with
// DagBuilder, as the graph tests do): the one unregistered name the loader
// accepts.
inline constexpr const char* kHandBuiltAlgorithm = "hand_built";

// scope "global": all P images; the file also lists the message edges.
std::string dag_to_json(const GlobalDag& dag);
bool dag_from_json(const std::string& text, GlobalDag* out, std::string* error);

bool save_dag_file(const GlobalDag& dag, const std::string& path, std::string* error);

// The largest document load_dag_file (and so save_dag_file) accepts.
inline constexpr uint64_t kMaxGraphDocumentBytes = uint64_t{512} << 20;
// A lower bound of the bytes `image` adds to dag_to_json's document: its
// section as dumped alone (in the document every line of it is indented
// further). The sum over the images built so far lets a caller refuse a
// DAG too big to save before it builds the rest (generate_global_bounded).
uint64_t image_json_bytes(const LocalDag& image);
// generate_global, but image by image, stopping with *error as soon as the
// images built so far hold more than kMaxGraphDocumentBytes of JSON: the
// DAG could not be saved, and building all of it may take gigabytes.
bool generate_global_bounded(const CollectiveSpec& spec, GlobalDag* out, std::string* error);
bool load_dag_file(const std::string& path, GlobalDag* out, std::string* error);

// Whether JSON text nests at most `max_depth` arrays and objects (brackets
// inside strings do not count). nlohmann's parse, copy and dump recurse
// once per level, so every reader of outside JSON bounds the depth on the
// raw text first: a hostile "[[[[..." would otherwise cost memory per level
// and overflow the stack.
bool json_nesting_ok(const std::string& text, size_t max_depth);

// The whole of a file of at most `limit` bytes into *text; false with
// *error starting with the path (missing, a directory, too large).
bool read_bounded_file(const std::string& path, uint64_t limit, std::string* text, std::string* error);

// Graphviz rendering: one cluster per image, CARs as nodes labelled with kind,
// peer, tag and bytes; dependency edges inside clusters (buffer dependencies
// dashed), message edges between clusters in bold.
std::string dag_to_dot(const GlobalDag& dag);

}  // namespace carflow
