// The CF_* knob table (Config::knobs(), engine/config.cc): api/README.md's
// "Environment" table is exactly its markdown, and Config::from_env reads
// every row by it (defaults, ranges, error texts, the rules across rows).
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/config.h"

using carflow::Config;
using carflow::Knob;

namespace {

struct Env {  // sets one variable for the scope of a check
  std::string name;
  Env(const std::string& n, const std::string& v) : name(n) { ::setenv(n.c_str(), v.c_str(), 1); }
  ~Env() { ::unsetenv(name.c_str()); }
};

// The table lines ('|' first) of README's "## Environment" section.
std::vector<std::string> readme_table(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot read ", path);
  std::vector<std::string> lines;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line == "## Environment";
      continue;
    }
    if (in_section && line.rfind("|", 0) == 0) lines.push_back(line);
  }
  return lines;
}

std::string from_env_error() {
  Config c;
  std::string error;
  CHECK_FALSE(Config::from_env(&c, &error));
  return error;
}

}  // namespace

TEST_CASE("api/README.md's Environment table is the code's table (tools/carflow info --markdown)") {
  const std::vector<std::string> readme = readme_table("api/README.md");
  const std::vector<std::string> code = Config::markdown_table();
  REQUIRE_MESSAGE(!readme.empty(), "api/README.md: no table under \"## Environment\"");
  for (size_t i = 0; i < std::max(readme.size(), code.size()); ++i) {
    const std::string want = i < code.size() ? code[i] : "(no row)";
    const std::string have = i < readme.size() ? readme[i] : "(no row)";
    if (want != have) {
      FAIL("api/README.md's Environment table differs from engine/config.cc's at table line ", i + 1,
           ":\n  README: ", have, "\n  code:   ", want,
           "\n(regenerate: tools/carflow info --markdown, and paste it into api/README.md)");
    }
  }
}

TEST_CASE("every row names a distinct CF_ variable, and describe() lists them in order") {
  std::set<std::string> names;
  const auto rows = Config{}.describe();
  REQUIRE(rows.size() == Config::knobs().size());
  size_t i = 0;
  for (const Knob& k : Config::knobs()) {
    CAPTURE(k.name);
    CHECK(k.name.rfind("CF_", 0) == 0);
    CHECK(names.insert(k.name).second);
    CHECK(!k.range.empty());
    CHECK(!k.doc.empty());
    CHECK(k.doc.find('\n') == std::string::npos);
    CHECK(rows[i].name == k.name);
    CHECK(rows[i].range == k.range);
    if (!k.set_by_launcher()) CHECK(rows[i].value == k.fallback);
    ++i;
  }
  for (int kind = 0; kind < carflow::kCollKinds; ++kind) {
    CHECK(names.count(Config::algo_variable(static_cast<carflow::CollKind>(kind))) == 1);
  }
  for (const char* launcher : {"CF_RANK", "CF_NODES", "CF_KVS", "CF_IMAGES"}) CHECK(names.count(launcher) == 1);
}

TEST_CASE("a knob set to its default text reads back as the default") {
  for (const Knob& k : Config::knobs()) {
    if (k.set_by_launcher() || k.fallback.rfind("(", 0) == 0) continue;  // (table), (auto)
    CAPTURE(k.name);
    Env e(k.name, k.fallback);
    Config c;
    std::string error;
    REQUIRE_MESSAGE(Config::from_env(&c, &error), error);
    CHECK(k.show(c) == k.fallback);
  }
}

TEST_CASE("values are read into Config; bad ones name the variable and the rule") {
  Config c;
  std::string error;
  {
    Env a("CF_SEGMENT_BYTES", "64"), b("CF_PEER_TIMEOUT", "0.5"), d("CF_TREE_RADIX", "8"), f("CF_CHECK", "1"),
        g("CF_HOST_RINGS", "0"), h("CF_PROGRESS", "block"), o("CF_OFI_PROVIDER", "tcp;ofi_rxm"),
        al("CF_ALGO_BROADCAST", "flat");
    REQUIRE_MESSAGE(Config::from_env(&c, &error), error);
    CHECK(c.segment_bytes == 64);
    CHECK(c.peer_timeout_ms == 500);
    CHECK(c.tree_radix == 8);
    CHECK(c.check);
    CHECK_FALSE(c.host_rings);
    CHECK(c.progress == carflow::ProgressMode::Block);
    CHECK(c.ofi_provider == "tcp;ofi_rxm");
    CHECK(c.algo[static_cast<int>(carflow::CollKind::Broadcast)] == "flat");
    for (const auto& row : c.describe()) {
      if (row.name == "CF_PEER_TIMEOUT") CHECK(row.value == "0.5");
      if (row.name == "CF_ALGO_BROADCAST") CHECK(row.value == "flat");
      if (row.name == "CF_ALGO_BARRIER") CHECK(row.value == "(table)");
    }
  }
  {
    Env e("CF_EAGER_BYTES", "abc");
    CHECK(from_env_error() == "CF_EAGER_BYTES='abc': expected an integer in [0, 1048576]");
  }
  {
    Env e("CF_TREE_RADIX", "1");
    CHECK(from_env_error() == "CF_TREE_RADIX='1': expected an integer in [2, 64]");
  }
  {
    Env e("CF_OFI_CREDITS", "-1");
    CHECK(from_env_error() == "CF_OFI_CREDITS='-1': expected an integer in [1, 4096]");
  }
  {
    Env e("CF_EXIT_TIMEOUT", "0");
    CHECK(from_env_error() == "CF_EXIT_TIMEOUT='0': expected seconds in (0, 86400]");
  }
  {
    Env e("CF_SEGMENT_BYTES", "63");
    CHECK(from_env_error() == "CF_SEGMENT_BYTES=63: must be 0 (no segmentation) or at least 64");
  }
  {
    Env e("CF_DATA_ALIGNMENT", "24");
    CHECK(from_env_error() == "CF_DATA_ALIGNMENT=24: must be a power of two");
  }
  {
    Env l("CF_LOGP_L", "0"), o("CF_LOGP_O", "0"), g("CF_LOGP_G", "0");
    CHECK(from_env_error() == "CF_LOGP_L, CF_LOGP_O, CF_LOGP_G: may not all be 0");
  }
  {
    // Any well-formed name: the generator may be registered after cf_init.
    Env e("CF_ALGO_BARRIER", "nope");
    Config c;
    std::string error;
    CHECK(Config::from_env(&c, &error));
    CHECK(c.algo[static_cast<int>(carflow::CollKind::Barrier)] == "nope");
  }
  {
    Env e("CF_ALGO_BARRIER", "no/pe");
    CHECK(from_env_error() == "CF_ALGO_BARRIER='no/pe': not an algorithm name (1 to 64 bytes of [A-Za-z0-9_.-])");
  }
  {
    Env e("CF_PROGRESS", "spin");
    CHECK(from_env_error() == "CF_PROGRESS='spin': expected poll, thread or block");
  }
  {
    Env e("CF_RANK", "x");  // the launcher's: read by transports/bootstrap, not by Config
    REQUIRE(Config::from_env(&c, &error));
  }
}

TEST_CASE("CF_FAULT: each kind reads back as written; a malformed spec names CF_FAULT and the rule") {
  for (const char* spec : {"kill_after:5", "close_link:0,node=2", "stop:2.5", "delay:100,node=0", "nomem:cache",
                           "nomem:unexpected", "nomem:unexpected,node=1"}) {
    CAPTURE(spec);
    Env e("CF_FAULT", spec);
    Config c;
    std::string error;
    REQUIRE_MESSAGE(Config::from_env(&c, &error), error);
    CHECK(c.fault.kind != carflow::FaultSpec::None);
    for (const auto& row : c.describe()) {
      if (row.name == "CF_FAULT") CHECK(row.value == spec);
    }
  }
  {
    Env e("CF_FAULT", "kill_after:5,node=1");
    Config c;
    std::string error;
    REQUIRE(Config::from_env(&c, &error));
    CHECK(c.fault.applies_to(1));
    CHECK_FALSE(c.fault.applies_to(0));
  }
  CHECK(Config{}.fault.kind == carflow::FaultSpec::None);  // off by default
  {
    Env e("CF_FAULT", "explode:1");
    CHECK(from_env_error() == "CF_FAULT='explode:1': unknown kind 'explode' (expected kill_after, close_link, stop, delay or nomem)");
  }
  {
    Env e("CF_FAULT", "kill_after");
    CHECK(from_env_error() ==
          "CF_FAULT='kill_after': expected KIND:VALUE[,node=N] (KIND kill_after, close_link, stop or delay)");
  }
  {
    Env e("CF_FAULT", "kill_after:-1");
    CHECK(from_env_error() == "CF_FAULT='kill_after:-1': kill_after takes a message count in [0, 2^40]");
  }
  {
    Env e("CF_FAULT", "stop:0");
    CHECK(from_env_error() == "CF_FAULT='stop:0': stop takes seconds in (0, 86400]");
  }
  {
    Env e("CF_FAULT", "nomem:cache,node=1");
    CHECK(from_env_error() == "CF_FAULT='nomem:cache,node=1': nomem:cache fails the same call on every image, so it takes no node");
  }
  {
    Env e("CF_FAULT", "nomem:heap");
    CHECK(from_env_error() == "CF_FAULT='nomem:heap': nomem takes 'cache' or 'unexpected'");
  }
  {
    Env e("CF_FAULT", "delay:5,rank=1");
    CHECK(from_env_error() == "CF_FAULT='delay:5,rank=1': after the value only ',node=N' (N a node number)");
  }
}
