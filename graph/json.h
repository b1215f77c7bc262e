// Graph JSON, schema "carflow.graph/1" (documented in README.md).
//
// Saving then loading gives back an equal GlobalDag, and saving that again
// gives the same text. Loading is hostile-input safe: every field is checked
// for presence, type and range before use, sizes are bounded, and a bad file
// yields false with an error naming the JSON path and the rule
// (e.g. "images[2].cars[5].peer: 9 is not a team rank (P = 8)").
#pragma once

#include <string>

#include "graph/car.h"

namespace carflow {

// scope "global": all P images; the file also lists the message edges.
std::string dag_to_json(const GlobalDag& dag);
bool dag_from_json(const std::string& text, GlobalDag* out, std::string* error);

bool save_dag_file(const GlobalDag& dag, const std::string& path, std::string* error);
bool load_dag_file(const std::string& path, GlobalDag* out, std::string* error);

// Graphviz rendering: one cluster per image, CARs as nodes labelled with kind,
// peer, tag and bytes; dependency edges inside clusters (buffer dependencies
// dashed), message edges between clusters in bold.
std::string dag_to_dot(const GlobalDag& dag);

}  // namespace carflow
