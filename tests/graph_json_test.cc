// Graph JSON (schema "carflow.graph/1"): exact round trips, the document's
// shape, a corpus of hostile documents, files, and the Graphviz rendering.
#include <doctest/doctest.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/json.h"
#include "graph/layout.h"
#include "graph/registry.h"
#include "graph/validate.h"
#include "graph_test_dags.h"

namespace carflow {
namespace {

using OrderedJson = nlohmann::ordered_json;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// No C0 control or DEL (a newline only where allowed).
bool no_control_characters(const std::string& text, bool newlines) {
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && !(newlines && ch == '\n')) || c == 0x7f) return false;
  }
  return true;
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");  // set by bazel test
  return (std::filesystem::path(dir != nullptr ? dir : "/tmp") / name).string();
}

// The error dag_from_json reports, or "" when it loads.
std::string load_error(const std::string& text) {
  GlobalDag dag;
  std::string error;
  return dag_from_json(text, &dag, &error) ? "" : error;
}

const std::string& sample_text() {
  static const std::string text = dag_to_json(test_dags::three_image_mix());
  return text;
}

// The loader's bound on nbytes, user buffers and temp slots: below 2^48.
constexpr uint64_t kMaxBytes = (uint64_t{1} << 48) - 1;

// one_message at the edges of every field's range.
GlobalDag extreme_values_dag() {
  GlobalDag dag = test_dags::one_message();
  dag.spec.flags = INT_MIN;
  dag.spec.segment_bytes = UINT64_MAX;
  dag.spec.nbytes = kMaxBytes;
  dag.spec.elem_size = UINT32_MAX;
  dag.spec.root = 1;
  for (LocalDag& image : dag.images) {
    image.src_bytes = src_extent(dag.spec, image.image);  // the broadcast root's: nbytes, others: 0
    image.dst_bytes = dst_extent(dag.spec, image.image);
    image.temps = {0, kMaxBytes};
  }
  dag.images[0].cars[0].src = temp(1, kMaxBytes - 8, 8);
  dag.images[0].cars[0].tag = UINT32_MAX;
  dag.images[1].cars[0].dst = user_dst(kMaxBytes - 8, 8);
  dag.images[1].cars[0].tag = UINT32_MAX;
  return dag;
}

TEST_CASE("saving then loading gives an equal DAG, and saving that again the same text") {
  const std::vector<std::pair<const char*, GlobalDag>> dags = {
      {"one_message", test_dags::one_message()},
      {"three_image_mix", test_dags::three_image_mix()},
      {"extreme_values", extreme_values_dag()}};
  for (const auto& entry : dags) {
    const char* name = entry.first;
    const GlobalDag& dag = entry.second;
    CAPTURE(name);
    const std::string text = dag_to_json(dag);
    GlobalDag loaded;
    std::string error;
    REQUIRE_MESSAGE(dag_from_json(text, &loaded, &error), error);
    CHECK(loaded == dag);
    CHECK(dag_to_json(loaded) == text);
  }
}

TEST_CASE("the document follows schema carflow.graph/1") {
  const std::string& text = sample_text();
  CHECK(text.rfind("{\n \"schema\": \"carflow.graph/1\",\n \"scope\": \"global\",\n \"collective\": {", 0) == 0);
  const OrderedJson doc = OrderedJson::parse(text);
  CHECK(doc["collective"] == OrderedJson::parse(R"({"kind": "allreduce", "algorithm": "hand_built",
      "images": 3, "root": 0, "nbytes": 16, "elem_size": 1, "segment_bytes": 0, "flags": 0})"));
  const OrderedJson& image0 = doc["images"][0];
  CHECK(image0["temps"] == OrderedJson::array({16}));
  CHECK(image0["exit"] == 3);
  CHECK(image0["cars"][0] == OrderedJson::parse(R"({"id": 0, "kind": "SEND", "peer": 1, "tag": 0,
      "src": {"space": "user_src", "offset": 0, "length": 16}, "deps": []})"));
  CHECK(image0["cars"][1]["dst"] == OrderedJson::parse(R"({"space": "temp", "slot": 0, "offset": 0, "length": 16})"));
  CHECK(image0["cars"][2]["deps"] == OrderedJson::parse(R"([{"car": 1, "kind": "buffer"}])"));
  CHECK(image0["cars"][3] == OrderedJson::parse(R"({"id": 3, "kind": "JOIN",
      "deps": [{"car": 0, "kind": "progress"}, {"car": 2, "kind": "progress"}]})"));
  const OrderedJson& image1 = doc["images"][1];
  CHECK(image1["cars"][1]["incoming_left"] == true);
  CHECK(image1["cars"][3] == OrderedJson::parse(R"({"id": 3, "kind": "SEND", "peer": 2, "tag": 6,
      "deps": [{"car": 2, "kind": "progress"}]})"));
  CHECK(!doc["images"][2]["cars"][0].contains("incoming_left"));
  CHECK(doc["messages"] == OrderedJson::parse(R"([{"from": [0, 0], "to": [1, 1]},
      {"from": [1, 2], "to": [2, 0]}, {"from": [1, 3], "to": [2, 1]}, {"from": [2, 2], "to": [0, 1]}])"));
}

// ---- the hostile corpus ---------------------------------------------------

struct BadDocument {
  const char* name;
  std::function<std::string()> text;
  std::string expected;  // part of the error: the JSON path and the rule
};

std::function<std::string()> edit(std::function<void(OrderedJson&)> change) {
  return [change] {
    OrderedJson doc = OrderedJson::parse(sample_text());
    change(doc);
    return doc.dump(1);
  };
}

std::function<std::string()> raw(std::string text) {
  return [text] { return text; };
}

// The sample text with its first `from` replaced, for values JSON libraries
// will not produce (2^64, invalid UTF-8).
std::function<std::string()> replace_text(std::string from, std::string to) {
  return [from, to] {
    std::string text = sample_text();
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
}

OrderedJson& car(OrderedJson& doc, int image, int id) { return doc["images"][image]["cars"][id]; }

std::vector<BadDocument> syntax_and_header_corpus() {
  return {
      {"not JSON", raw("{"), "not valid JSON"},
      {"empty text", raw(""), "not valid JSON"},
      {"trailing garbage", raw("{}x"), "not valid JSON"},
      {"an array at the top", raw("[1, 2]"), "document: expected an object"},
      {"null at the top", raw("null"), "document: expected an object"},
      {"nesting 100000 deep", raw(std::string(100000, '[') + std::string(100000, ']')),
       "document: nests deeper than 64 levels"},
      {"unclosed nesting 100000 deep", raw(std::string(100000, '{')), "document: nests deeper than 64 levels"},
      {"invalid UTF-8 in a string", replace_text("hand_built", "hand\xff\xfe"), "not valid JSON"},
      {"invalid UTF-8 outside strings", replace_text("\"scope\"", "\xc3\x28"), "not valid JSON"},
      {"another schema", edit([](OrderedJson& d) { d["schema"] = "carflow.graph/2"; }),
       "schema: 'carflow.graph/2' is not supported (expected 'carflow.graph/1')"},
      {"no schema", edit([](OrderedJson& d) { d.erase("schema"); }), "schema: missing"},
      {"a numeric schema", edit([](OrderedJson& d) { d["schema"] = 1; }), "schema: expected a string"},
      {"a local scope", edit([](OrderedJson& d) { d["scope"] = "local"; }), "scope: 'local' is not supported"},
      {"an unknown top-level field", edit([](OrderedJson& d) { d["extra"] = 1; }),
       "extra: not a field of the document"},
      {"no collective", edit([](OrderedJson& d) { d.erase("collective"); }), "collective: missing"},
      {"an unknown collective kind", edit([](OrderedJson& d) { d["collective"]["kind"] = "teleport"; }),
       "collective.kind: 'teleport' is not a collective kind"},
      {"zero images", edit([](OrderedJson& d) { d["collective"]["images"] = 0; }),
       "collective.images: 0 is out of range [1, 65536]"},
      {"too many images", edit([](OrderedJson& d) { d["collective"]["images"] = 70000; }),
       "collective.images: 70000 is out of range [1, 65536]"},
      {"negative nbytes", edit([](OrderedJson& d) { d["collective"]["nbytes"] = -1; }),
       "collective.nbytes: expected an unsigned integer"},
      {"fractional nbytes", edit([](OrderedJson& d) { d["collective"]["nbytes"] = 1.5; }),
       "collective.nbytes: expected an unsigned integer"},
      {"nbytes as a string", edit([](OrderedJson& d) { d["collective"]["nbytes"] = "16"; }),
       "collective.nbytes: expected an unsigned integer"},
      {"nbytes of 2^64", replace_text("\"nbytes\": 16", "\"nbytes\": 18446744073709551616"),
       "collective.nbytes: expected an unsigned integer"},
      {"src_bytes of 1e300", edit([](OrderedJson& d) { d["images"][0]["src_bytes"] = 1e300; }),
       "images[0].src_bytes: expected an unsigned integer"},
      {"flags as a string", edit([](OrderedJson& d) { d["collective"]["flags"] = "x"; }),
       "collective.flags: expected an integer in the range of int"},
      {"flags beyond int", edit([](OrderedJson& d) { d["collective"]["flags"] = 4294967296LL; }),
       "collective.flags: expected an integer in the range of int"},
      {"a root outside the team", edit([](OrderedJson& d) { d["collective"]["root"] = 3; }),
       "collective.root: 3 is not a team rank (P = 3)"},
      {"zero elem_size", edit([](OrderedJson& d) { d["collective"]["elem_size"] = 0; }),
       "collective.elem_size: 0 is out of range"},
  };
}

std::vector<BadDocument> image_corpus() {
  return {
      {"images not an array", edit([](OrderedJson& d) { d["images"] = OrderedJson::object(); }),
       "images: expected an array"},
      {"an image missing", edit([](OrderedJson& d) { d["images"].erase(2); }),
       "images: 2 entries but collective.images is 3"},
      {"a million images", edit([](OrderedJson& d) { d["images"] = std::vector<int>(1000000, 0); }),
       "images: 1000000 entries exceed the limit of 65536"},
      {"an image that is a number", edit([](OrderedJson& d) { d["images"][0] = 5; }),
       "images[0]: expected an object"},
      {"an image out of place", edit([](OrderedJson& d) { d["images"][1]["image"] = 2; }),
       "images[1].image: 2 must equal its index 1"},
      {"cars not an array", edit([](OrderedJson& d) { d["images"][0]["cars"] = OrderedJson::object(); }),
       "images[0].cars: expected an array"},
      {"a million temp slots", edit([](OrderedJson& d) { d["images"][0]["temps"] = std::vector<int>(1000000, 8); }),
       "images[0].temps: 1000000 entries exceed the limit of 4096"},
      {"a negative temp size", edit([](OrderedJson& d) { d["images"][0]["temps"][0] = -16; }),
       "images[0].temps[0]: expected an unsigned integer"},
      {"an exit outside the image", edit([](OrderedJson& d) { d["images"][0]["exit"] = 4; }),
       "images[0].exit: 4 is not a CAR of this image (4 cars)"},
      {"an exit that is not a JOIN", edit([](OrderedJson& d) { d["images"][0]["exit"] = 0; }),
       "image 0 car 0 (SEND): the exit must be a JOIN"},
      {"a CAR that does not reach the exit",
       edit([](OrderedJson& d) { car(d, 0, 3)["deps"] = OrderedJson::parse(R"([{"car": 0, "kind": "progress"}])"); }),
       "image 0 car 1 (RECV): does not reach the exit (car 3)"},
  };
}

std::vector<BadDocument> car_corpus() {
  return {
      {"an id that is not its index", edit([](OrderedJson& d) { car(d, 0, 0)["id"] = 7; }),
       "images[0].cars[0].id: 7 must equal its index 0"},
      {"an unknown CAR kind", edit([](OrderedJson& d) { car(d, 0, 0)["kind"] = "FOO"; }),
       "images[0].cars[0].kind: 'FOO' is not a CAR kind"},
      {"an unknown CAR field", edit([](OrderedJson& d) { car(d, 0, 0)["foo"] = 1; }),
       "images[0].cars[0].foo: not a field of a CAR"},
      {"a SEND without a peer", edit([](OrderedJson& d) { car(d, 0, 0).erase("peer"); }),
       "images[0].cars[0].peer: missing"},
      {"a peer outside the team", edit([](OrderedJson& d) { car(d, 0, 0)["peer"] = 9; }),
       "images[0].cars[0].peer: 9 is not a team rank (P = 3)"},
      {"a peer equal to the image", edit([](OrderedJson& d) { car(d, 0, 0)["peer"] = 0; }),
       "images[0].cars[0].peer: 0 is the image itself"},
      {"a tag of 2^32", edit([](OrderedJson& d) { car(d, 0, 0)["tag"] = 4294967296ULL; }),
       "images[0].cars[0].tag: 4294967296 is out of range [0, 4294967295]"},
      {"a JOIN with a peer", edit([](OrderedJson& d) { car(d, 0, 3)["peer"] = 1; }),
       "images[0].cars[3].peer: only SEND, RECV and RECV_REDUCE have one"},
      {"incoming_left on a RECV", edit([](OrderedJson& d) { car(d, 0, 1)["incoming_left"] = true; }),
       "images[0].cars[1].incoming_left: only RECV_REDUCE has incoming_left"},
      {"incoming_left as a string", edit([](OrderedJson& d) { car(d, 1, 1)["incoming_left"] = "yes"; }),
       "images[1].cars[1].incoming_left: expected true or false"},
      {"a dependency on itself", edit([](OrderedJson& d) { car(d, 0, 2)["deps"][0]["car"] = 2; }),
       "images[0].cars[2].deps[0].car: 2 is the CAR itself"},
      {"a dependency out of range", edit([](OrderedJson& d) { car(d, 0, 2)["deps"][0]["car"] = 9; }),
       "images[0].cars[2].deps[0].car: 9 is not a CAR of this image (4 cars)"},
      {"an unknown dependency kind", edit([](OrderedJson& d) { car(d, 0, 2)["deps"][0]["kind"] = "data"; }),
       "images[0].cars[2].deps[0].kind: 'data' is not a dependency kind"},
      {"a million dependencies",
       edit([](OrderedJson& d) { car(d, 0, 2)["deps"] = std::vector<OrderedJson>(1000000, car(d, 0, 2)["deps"][0]); }),
       "images[0].cars[2].deps: 1000000 entries exceed the limit of 4"},
      {"a dependency cycle",
       edit([](OrderedJson& d) { car(d, 1, 0)["deps"] = OrderedJson::parse(R"([{"car": 2, "kind": "progress"}])"); }),
       "image 1 car 0 (COPY): dependency cycle car 0 -> car 1 -> car 2 -> car 0"},
  };
}

std::vector<BadDocument> buffer_and_message_corpus() {
  return {
      {"offset plus length past 2^64",
       edit([](OrderedJson& d) { car(d, 0, 0)["src"]["offset"] = UINT64_MAX; }),
       "image 0 car 0 (SEND): src: range [offset 18446744073709551615, length 16] runs past the end of user_src"},
      {"a temp slot the image lacks", edit([](OrderedJson& d) { car(d, 2, 0)["dst"]["slot"] = 5; }),
       "images[2].cars[0].dst.slot: 5 is not a temp slot (the image has 2)"},
      {"a temp buffer without a slot", edit([](OrderedJson& d) { car(d, 2, 0)["dst"].erase("slot"); }),
       "images[2].cars[0].dst.slot: missing"},
      {"a slot on a user buffer", edit([](OrderedJson& d) { car(d, 0, 0)["src"]["slot"] = 0; }),
       "images[0].cars[0].src.slot: only temp buffers have a slot"},
      {"an unknown buffer space", edit([](OrderedJson& d) { car(d, 0, 0)["src"]["space"] = "gpu"; }),
       "images[0].cars[0].src.space: 'gpu' is not a buffer space"},
      {"a none buffer with a length",
       edit([](OrderedJson& d) { car(d, 1, 3)["src"] = {{"space", "none"}, {"offset", 0}, {"length", 4}}; }),
       "image 1 car 3 (SEND): src: a none buffer must have offset 0 and length 0"},
      {"a SEND with a dst",
       edit([](OrderedJson& d) { car(d, 0, 0)["dst"] = {{"space", "user_dst"}, {"offset", 0}, {"length", 16}}; }),
       "image 0 car 0 (SEND): dst must be none for SEND (found user_dst)"},
      {"an unmatched SEND", edit([](OrderedJson& d) { car(d, 0, 0)["tag"] = 7; }),
       "image 1 car 1 (RECV_REDUCE): no SEND on image 0 matches (sender 0, receiver 1, tag 0)"},
      {"a duplicate tag", edit([](OrderedJson& d) { car(d, 1, 3)["tag"] = 5; }),
       "image 1 car 3 (SEND): duplicate message (sender 1, receiver 2, tag 5)"},
      {"a byte-count mismatch", edit([](OrderedJson& d) { car(d, 2, 0)["dst"]["length"] = 8; }),
       "image 2 car 0 (RECV): receives 8 bytes but its SEND image 1 car 2 (SEND) sends 16"},
      {"a message list that disagrees", edit([](OrderedJson& d) { d["messages"][0]["to"] = {1, 0}; }),
       "messages[0]: does not match the CARs, which pair image 0 car 0 with image 1 car 1"},
      {"a message list too short", edit([](OrderedJson& d) { d["messages"].erase(3); }),
       "messages: 3 entries but the DAG has 4 matched messages"},
      {"a million messages", edit([](OrderedJson& d) { d["messages"] = std::vector<int>(1000000, 0); }),
       "messages: 1000000 entries exceed the limit of 4"},
      {"a message end that is not a pair", edit([](OrderedJson& d) { d["messages"][0]["from"] = {0}; }),
       "messages[0].from: expected [image, car]"},
  };
}

// collective.algorithm: a generator registered for the kind, or hand_built.
std::vector<BadDocument> algorithm_corpus() {
  return {
      {"an unregistered algorithm", edit([](OrderedJson& d) { d["collective"]["algorithm"] = "nope"; }),
       "collective.algorithm: 'nope' is not an algorithm of allreduce (registered: "},
      {"another kind's algorithm", edit([](OrderedJson& d) { d["collective"]["algorithm"] = "binomial"; }),
       "collective.algorithm: 'binomial' is not an algorithm of allreduce"},
      {"an empty algorithm", edit([](OrderedJson& d) { d["collective"]["algorithm"] = ""; }),
       "collective.algorithm: '' is not an algorithm of allreduce"},
      {"an algorithm differing in case", edit([](OrderedJson& d) { d["collective"]["algorithm"] = "Ring"; }),
       "collective.algorithm: 'Ring' is not an algorithm of allreduce"},
  };
}

// Sizes: user buffers exactly what the collective implies, everything else
// below 2^48 bytes.
std::vector<BadDocument> size_corpus() {
  return {
      {"a temp slot of 2^62 bytes", edit([](OrderedJson& d) { d["images"][0]["temps"][0] = uint64_t{1} << 62; }),
       "images[0].temps[0]: 4611686018427387904 is out of range [0, 281474976710655]"},
      {"a temp slot of 2^48 bytes", edit([](OrderedJson& d) { d["images"][2]["temps"][1] = uint64_t{1} << 48; }),
       "images[2].temps[1]: 281474976710656 is out of range [0, 281474976710655]"},
      {"src_bytes of 2^63", edit([](OrderedJson& d) { d["images"][0]["src_bytes"] = uint64_t{1} << 63; }),
       "images[0].src_bytes: 9223372036854775808 is out of range [0, 281474976710655]"},
      {"dst_bytes of 2^64 - 1", edit([](OrderedJson& d) { d["images"][1]["dst_bytes"] = UINT64_MAX; }),
       "images[1].dst_bytes: 18446744073709551615 is out of range [0, 281474976710655]"},
      {"src_bytes larger than nbytes", edit([](OrderedJson& d) { d["images"][0]["src_bytes"] = 17; }),
       "images[0].src_bytes: 17 must equal 16, the size the collective implies for image 0"},
      {"dst_bytes smaller than nbytes", edit([](OrderedJson& d) { d["images"][2]["dst_bytes"] = 8; }),
       "images[2].dst_bytes: 8 must equal 16, the size the collective implies for image 2"},
      {"nbytes of 2^48", edit([](OrderedJson& d) { d["collective"]["nbytes"] = uint64_t{1} << 48; }),
       "collective.nbytes: 281474976710656 is out of range [0, 281474976710655]"},
      {"nbytes and buffers that disagree", edit([](OrderedJson& d) { d["collective"]["nbytes"] = 32; }),
       "images[0].src_bytes: 16 must equal 32, the size the collective implies for image 0"},
      {"an aggregate member of 2^62 bytes", edit([](OrderedJson& d) {
         d["images"][0]["members"] = OrderedJson::parse(R"([{"src_bytes": 16, "dst_bytes": 16, "elem_size": 1},
             {"src_bytes": 4611686018427387904, "dst_bytes": 0, "elem_size": 1}])");
       }),
       "images[0].members[1].src_bytes: 4611686018427387904 is out of range [0, 281474976710655]"},
  };
}

// Strings holding control characters; the error shows none of them.
std::vector<BadDocument> control_character_corpus() {
  return {
      {"a NUL in the algorithm", replace_text("\"hand_built\"", "\"hand_built\\u0000evil\""),
       "collective.algorithm: holds the control character U+0000 at byte 10"},
      {"a newline in the algorithm", replace_text("\"hand_built\"", "\"hand\\nbuilt\""),
       "collective.algorithm: holds the control character U+000A at byte 4"},
      {"a C1 control in the algorithm", replace_text("\"hand_built\"", "\"hand\\u0085built\""),
       "collective.algorithm: holds the control character U+0085 at byte 4"},
      {"a DEL in a CAR kind", edit([](OrderedJson& d) { car(d, 0, 0)["kind"] = "SEND\x7f"; }),
       "images[0].cars[0].kind: holds the control character U+007F at byte 4"},
      {"a NUL in the schema", replace_text("\"carflow.graph/1\"", "\"carflow.graph/1\\u0000\""),
       "schema: holds the control character U+0000 at byte 15"},
      {"a NUL in a buffer space", edit([](OrderedJson& d) { car(d, 0, 0)["src"]["space"] = std::string("temp\0", 5); }),
       "images[0].cars[0].src.space: holds the control character U+0000 at byte 4"},
      {"control characters in an unknown field's name",
       edit([](OrderedJson& d) { d["images"][0][std::string("a\0b\nc\x1b[31m", 10)] = 1; }),
       "images[0].a?b?c?[31m: not a field of an image"},
  };
}

TEST_CASE("every document of the hostile corpus is rejected with its path and rule") {
  std::vector<BadDocument> corpus = syntax_and_header_corpus();
  for (auto part : {image_corpus(), car_corpus(), buffer_and_message_corpus(), algorithm_corpus(),
                    size_corpus(), control_character_corpus()}) {
    corpus.insert(corpus.end(), part.begin(), part.end());
  }
  CHECK(corpus.size() >= 25);
  for (const BadDocument& bad : corpus) {
    CAPTURE(bad.name);
    const std::string error = load_error(bad.text());
    CAPTURE(error);
    CHECK(contains(error, bad.expected));
    CHECK(no_control_characters(error, false));
  }
}

TEST_CASE("an unknown algorithm's error lists the kind's registered algorithms") {
  const std::string error = load_error(edit([](OrderedJson& d) { d["collective"]["algorithm"] = "nope"; })());
  const std::string names = GeneratorRegistry::instance().names(CollKind::Allreduce);
  REQUIRE(!names.empty());
  CHECK(error == "collective.algorithm: 'nope' is not an algorithm of allreduce (registered: " + names +
                     "; or hand_built for a DAG built by hand)");
}

TEST_CASE("every algorithm registered for the kind loads, and so does hand_built") {
  CHECK(load_error(sample_text()) == "");  // the sample's algorithm is hand_built
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().list(CollKind::Allreduce)) {
    CAPTURE(gen->name);
    CHECK(load_error(edit([gen](OrderedJson& d) { d["collective"]["algorithm"] = gen->name; })()) == "");
  }
}

TEST_CASE("save_dag_file refuses an algorithm the loader would refuse") {
  const std::string path = temp_path("graph_json_test_algorithm.json");
  GlobalDag dag = test_dags::one_message();
  dag.spec.algorithm = "nope";
  std::string error;
  CHECK(!save_dag_file(dag, path, &error));
  CHECK(error.rfind(path + ": not saved, collective.algorithm: 'nope' is not an algorithm of broadcast", 0) == 0);
  CHECK(!std::filesystem::exists(path));
}

// Each layout's user buffer sizes are checked against the collective's
// v-form counts and block-cyclic arrays, not only against nbytes.
TEST_CASE("generated DAGs with variable blocks and block-cyclic arrays load with their exact buffer sizes") {
  std::vector<CollectiveSpec> specs;
  auto add = [&](CollKind kind, uint32_t P, uint32_t root, uint64_t nbytes, auto&& shape) {
    for (const GeneratorInfo* gen : GeneratorRegistry::instance().list(kind)) {
      CollectiveSpec spec;
      spec.kind = kind;
      spec.algorithm = gen->name;
      spec.images = P;
      spec.root = root;
      spec.nbytes = nbytes;
      shape(spec);
      specs.push_back(spec);
    }
  };
  const auto scattered = [](CollectiveSpec& s) {  // out of order, with gaps and an empty block
    s.counts = {3, 0, 5, 2, 4};
    s.displs = {20, 2, 9, 0, 30};
  };
  add(CollKind::Scatter, 5, 3, 0, scattered);
  add(CollKind::Gather, 5, 3, 0, scattered);
  add(CollKind::GatherAll, 5, 0, 0, [](CollectiveSpec& s) { s.counts = {3, 0, 5, 2, 4}; });
  add(CollKind::ReduceScatter, 5, 0, 0, [](CollectiveSpec& s) { s.counts = {3, 0, 5, 2, 4}; });
  add(CollKind::Exchange, 3, 0, 0, [](CollectiveSpec& s) { s.counts = {1, 0, 7, 2, 3, 0, 5, 4, 6}; });
  add(CollKind::Reduce, 4, 2, 8 * 37, [](CollectiveSpec& s) {
    s.elem_size = 8;
    s.src_blksz = 3;
    s.src_offset = 5;
  });
  add(CollKind::PrefixReduce, 4, 0, 4 * 37, [](CollectiveSpec& s) {
    s.elem_size = 4;
    s.src_blksz = 3;
    s.src_offset = 5;
    s.dst_blksz = 64;
    s.dst_offset = 1;
  });
  CHECK(specs.size() >= 7);
  for (const CollectiveSpec& spec : specs) {
    CAPTURE(coll_kind_name(spec.kind));
    CAPTURE(spec.algorithm);
    std::string error;
    REQUIRE_MESSAGE(check_layout(spec, &error), error);
    GlobalDag dag, loaded;
    REQUIRE_MESSAGE(generate_global(spec, &dag, &error), error);
    REQUIRE_MESSAGE(validate_global(dag, &error), error);
    for (const LocalDag& image : dag.images) {
      CHECK(image.src_bytes == src_extent(spec, image.image));
      CHECK(image.dst_bytes == dst_extent(spec, image.image));
    }
    const std::string text = dag_to_json(dag);
    REQUIRE_MESSAGE(dag_from_json(text, &loaded, &error), error);
    CHECK(loaded == dag);
    // One byte more on the last image's destination is refused.
    OrderedJson doc = OrderedJson::parse(text);
    OrderedJson& last = doc["images"][spec.images - 1];
    last["dst_bytes"] = last["dst_bytes"].get<uint64_t>() + 1;
    CHECK(load_error(doc.dump(1)).rfind("images[" + std::to_string(spec.images - 1) + "].dst_bytes: ", 0) == 0);
  }
}

TEST_CASE("image_json_bytes is a lower bound of each image's share of the document, for every algorithm") {
  // generate_global_bounded refuses a DAG once these sums pass the loader's
  // limit, so they must never overstate: summed over the images they stay
  // at or below the whole document, and a DAG under the limit is built
  // the same as generate_global builds it.
  uint32_t checked = 0;
  for (int k = 0; k < kCollKinds; ++k) {
    const auto kind = static_cast<CollKind>(k);
    for (const GeneratorInfo* gen : GeneratorRegistry::instance().list(kind)) {
      for (const uint32_t P : {1u, 5u, 16u}) {
        CollectiveSpec spec;
        spec.kind = kind;
        spec.algorithm = gen->name;
        spec.images = P;
        spec.root = P - 1;
        spec.nbytes = is_computational(kind) ? 8 * 40 : 40;
        spec.elem_size = is_computational(kind) ? 8 : 1;
        if (kind == CollKind::Permute) {
          for (uint32_t i = 0; i < P; ++i) spec.perm.push_back((i + 1) % P);
        }
        if (gen->params & kUsesNodes) spec.images_per_node = P % 2 == 0 ? 2 : 1;
        std::string error;
        if (!check_layout(spec, &error)) continue;
        CAPTURE(coll_kind_name(kind));
        CAPTURE(gen->name);
        CAPTURE(P);
        GlobalDag dag, bounded;
        REQUIRE_MESSAGE(generate_global(spec, &dag, &error), error);
        REQUIRE_MESSAGE(generate_global_bounded(spec, &bounded, &error), error);
        CHECK(bounded == dag);
        uint64_t sum = 0;
        for (const LocalDag& image : dag.images) sum += image_json_bytes(image);
        CHECK(sum <= dag_to_json(dag).size());
        ++checked;
      }
    }
  }
  CHECK(checked > 60);
}

// The reader gets past the depth guard to the algorithm rule.
TEST_CASE("brackets inside strings do not count as nesting") {
  GlobalDag dag = test_dags::one_message();
  dag.spec.algorithm = std::string(100, '[') + "\\\"" + std::string(100, '{');
  CHECK(load_error(dag_to_json(dag)).rfind("collective.algorithm: '" + std::string(64, '[') +
                                               "' is not an algorithm of broadcast", 0) == 0);
}

TEST_CASE("nesting of 64 levels passes the depth guard and 65 levels does not") {
  CHECK(load_error(std::string(64, '[') + std::string(64, ']')) == "document: expected an object");
  CHECK(load_error(std::string(65, '[') + std::string(65, ']')) == "document: nests deeper than 64 levels");
}

TEST_CASE("a failed load leaves the output untouched") {
  GlobalDag out = test_dags::one_message();
  std::string error;
  CHECK(!dag_from_json(replace_text("\"peer\": 1", "\"peer\": 0")(), &out, &error));
  CHECK(out == test_dags::one_message());
}

// ---- files ----------------------------------------------------------------

TEST_CASE("save_dag_file and load_dag_file round trip through a file") {
  const std::string path = temp_path("graph_json_test_roundtrip.json");
  const GlobalDag dag = test_dags::three_image_mix();
  std::string error;
  REQUIRE_MESSAGE(save_dag_file(dag, path, &error), error);
  CHECK(!std::filesystem::exists(path + ".tmp"));
  GlobalDag loaded;
  REQUIRE_MESSAGE(load_dag_file(path, &loaded, &error), error);
  CHECK(loaded == dag);
  std::filesystem::remove(path);
}

TEST_CASE("loading a missing file names the file") {
  GlobalDag dag;
  std::string error;
  CHECK(!load_dag_file("/nonexistent/carflow/dag.json", &dag, &error));
  CHECK(error == "/nonexistent/carflow/dag.json: cannot open (No such file or directory)");
}

TEST_CASE("loading a directory is rejected") {
  GlobalDag dag;
  std::string error;
  const std::string dir = temp_path("");
  CHECK(!load_dag_file(dir, &dag, &error));
  CHECK(contains(error, "is a directory"));
}

TEST_CASE("loading a file over 512 MiB is rejected before it is read") {
  const std::string path = temp_path("graph_json_test_huge.json");
  {
    std::ofstream create(path);
  }
  std::filesystem::resize_file(path, (uint64_t{512} << 20) + 1);  // sparse: no disk used
  GlobalDag dag;
  std::string error;
  CHECK(!load_dag_file(path, &dag, &error));
  CHECK(error == path + ": larger than the limit of 512 MiB (536870913 bytes)");
  std::filesystem::remove(path);
}

TEST_CASE("loading a file of bad JSON prefixes the error with the file name") {
  const std::string path = temp_path("graph_json_test_bad.json");
  {
    std::ofstream file(path);
    file << "{\"schema\": \"other\"}";
  }
  GlobalDag dag;
  std::string error;
  CHECK(!load_dag_file(path, &dag, &error));
  CHECK(error == path + ": schema: 'other' is not supported (expected 'carflow.graph/1')");
  std::filesystem::remove(path);
}

TEST_CASE("save_dag_file refuses an invalid DAG and a path it cannot create") {
  std::string error;
  const std::string path = temp_path("graph_json_test_invalid.json");
  CHECK(!save_dag_file(test_dags::crossed_receives(), path, &error));
  CHECK(contains(error, "not saved, the DAG is invalid: deadlock"));
  CHECK(!std::filesystem::exists(path));
  CHECK(!save_dag_file(test_dags::one_message(), "/nonexistent/carflow/dag.json", &error));
  CHECK(contains(error, "/nonexistent/carflow/dag.json: cannot create"));
}

// ---- Graphviz -------------------------------------------------------------

TEST_CASE("dag_to_dot draws one cluster per image, dependency edges and bold message edges") {
  const std::string dot = dag_to_dot(test_dags::three_image_mix());
  CAPTURE(dot);
  CHECK(dot.rfind("digraph carflow {\n", 0) == 0);
  for (const char* part : {"subgraph cluster_0 {", "subgraph cluster_1 {", "subgraph cluster_2 {",
                           "i1_c1 [label=\"1 RECV_REDUCE\\npeer 0 tag 0\\n16 B\"];",
                           "i0_c3 [label=\"3 JOIN\\n(exit)\"];",
                           "i0_c1 -> i0_c2 [style=dashed];", "i0_c2 -> i0_c3;",
                           "i0_c0 -> i1_c1 [style=bold];", "i1_c3 -> i2_c1 [style=bold];",
                           "i2_c2 -> i0_c1 [style=bold];"}) {
    CAPTURE(part);
    CHECK(contains(dot, part));
  }
  CHECK(dot.substr(dot.size() - 2) == "}\n");
}

// dag_to_dot also draws DAGs that never went through the loader.
TEST_CASE("dag_to_dot escapes quotes, backslashes and newlines and drops control characters") {
  GlobalDag dag = test_dags::one_message();
  dag.spec.algorithm = std::string("n\xc3\xa4me \"q\" a\\b\nc\td\0e\x7f\xc2\x85\xffz", 24);
  const std::string dot = dag_to_dot(dag);
  CAPTURE(dot);
  CHECK(contains(dot, "  label=\"broadcast n\xc3\xa4me \\\"q\\\" a\\\\b\\nc?d?e???z, P = 2, 8 bytes\";\n"));
  CHECK(no_control_characters(dot, true));
  CHECK(dot.substr(dot.size() - 2) == "}\n");
}

TEST_CASE("a file whose algorithm holds a NUL is refused and draws nothing") {
  GlobalDag dag;
  std::string text = dag_to_json(test_dags::one_message());
  text.replace(text.find("\"hand_built\""), 12, "\"hand\\u0000built\"");
  std::string error;
  CHECK(!dag_from_json(text, &dag, &error));
  CHECK(error == "collective.algorithm: holds the control character U+0000 at byte 4");
  CHECK(dag == GlobalDag{});
}

}  // namespace
}  // namespace carflow
