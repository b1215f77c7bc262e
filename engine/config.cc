#include "engine/config.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "graph/car.h"
#include "graph/registry.h"
#include "engine/tuning.h"

namespace carflow {
namespace {

constexpr uint64_t k2p20 = uint64_t{1} << 20, k2p40 = uint64_t{1} << 40;

// A bound as the docs write it: 2^k from 2^20 up, 10^k from 10^6 up.
std::string bound_text(uint64_t v) {
  if (v >= k2p20 && (v & (v - 1)) == 0) {
    int k = 0;
    while ((uint64_t{1} << k) != v) ++k;
    return "2^" + std::to_string(k);
  }
  if (v >= 1000000) {
    int k = 0;
    uint64_t p = 1;
    while (p < v && p <= UINT64_MAX / 10) p *= 10, ++k;
    if (p == v) return "10^" + std::to_string(k);
  }
  return std::to_string(v);
}

// Milliseconds as seconds, without trailing zeros: 5000 "5", 2500 "2.5".
std::string seconds_text(uint64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (const uint64_t frac = ms % 1000; frac != 0) {
    std::string f = std::to_string(frac);
    f.insert(0, 3 - f.size(), '0');
    while (f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s;
}

// An unsigned integer in [min, max] into an integer or bool member.
template <typename T>
Knob uint_knob(const char* name, uint64_t min, uint64_t max, T Config::*member, const char* doc) {
  Knob k;
  k.name = name;
  k.range = bound_text(min) + ".." + bound_text(max);
  k.doc = doc;
  k.parse = [name = k.name, min, max, member](const char* text, Config* c, std::string* error) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || text[0] == '-' || v < min || v > max) {
      *error = name + "='" + text + "': expected an integer in [" + std::to_string(min) + ", " +
               std::to_string(max) + "]";
      return false;
    }
    c->*member = static_cast<T>(v);
    return true;
  };
  k.show = [member](const Config& c) { return std::to_string(static_cast<uint64_t>(c.*member)); };
  return k;
}

// A rule beyond the integer range, checked once every variable is read;
// `rule` is appended to the range text.
Knob with_rule(Knob k, const char* rule, std::function<bool(const Config&, std::string*)> check) {
  k.range += std::string("; ") + rule;
  k.check = std::move(check);
  return k;
}

// One of a few named values.
template <typename E>
Knob choice_knob(const char* name, std::vector<std::pair<const char*, E>> choices, E Config::*member,
                 const char* doc) {
  std::string expected;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) expected += i + 1 == choices.size() ? " or " : ", ";
    expected += choices[i].first;
  }
  Knob k;
  k.name = name;
  k.range = expected;
  k.doc = doc;
  k.parse = [name = k.name, expected, choices, member](const char* text, Config* c, std::string* error) {
    for (const auto& [word, value] : choices) {
      if (std::strcmp(text, word) == 0) {
        c->*member = value;
        return true;
      }
    }
    *error = name + "='" + text + "': expected " + expected;
    return false;
  };
  k.show = [choices, member](const Config& c) {
    for (const auto& [word, value] : choices) {
      if (c.*member == value) return std::string(word);
    }
    return std::string("?");
  };
  return k;
}

// Seconds, possibly fractional (CF_PEER_TIMEOUT=0.5), into a milliseconds member.
Knob seconds_knob(const char* name, uint64_t Config::*member_ms, const char* doc) {
  Knob k;
  k.name = name;
  k.range = "seconds in (0, 86400]";
  k.doc = doc;
  k.parse = [name = k.name, member_ms](const char* text, Config* c, std::string* error) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text, &end);
    if (errno != 0 || *end != '\0' || !(v > 0) || v > 86400) {
      *error = name + "='" + text + "': expected seconds in (0, 86400]";
      return false;
    }
    c->*member_ms = static_cast<uint64_t>(v * 1000 + 0.5);
    return true;
  };
  k.show = [member_ms](const Config& c) { return seconds_text(c.*member_ms); };
  return k;
}

// A seconds knob whose unset value (0) means off, and shows so.
Knob off_when_zero(Knob k) {
  auto show = k.show;
  k.show = [show](const Config& c) {
    const std::string text = show(c);
    return text == "0" ? std::string("(off)") : text;
  };
  return k;
}

// Free text into a string member; `unset` shows an empty one.
Knob string_knob(const char* name, const char* range, std::string Config::*member, const char* unset,
                 const char* doc) {
  Knob k;
  k.name = name;
  k.range = range;
  k.doc = doc;
  k.parse = [member](const char* text, Config* c, std::string*) {
    c->*member = text;
    return true;
  };
  k.show = [member, unset](const Config& c) { return (c.*member).empty() ? std::string(unset) : c.*member; };
  return k;
}

// CF_ALGO_<KIND>: an algorithm of the kind. Only the name's form is
// checked here: a program may register the generator after cf_init, so the
// first collective of the kind resolves it (engine/selection.cc).
Knob algo_knob(CollKind kind) {
  const int index = static_cast<int>(kind);
  const std::string coll = coll_kind_name(kind);
  Knob k;
  k.name = Config::algo_variable(kind);
  k.range = (std::strchr("aeiou", coll[0]) != nullptr ? "an " : "a ") + coll + " algorithm";
  k.doc = "force the " + coll + " algorithm (`carflow info` lists them; one registered after `cf_init` " +
          "counts; an unknown name fails the first " + coll + "); unset: the default table";
  k.parse = [name = k.name, index](const char* text, Config* c, std::string* error) {
    if (!GeneratorRegistry::well_formed_name(text)) {
      *error = name + "='" + text + "': not an algorithm name (1 to 64 bytes of [A-Za-z0-9_.-])";
      return false;
    }
    c->algo[index] = text;
    return true;
  };
  k.show = [index](const Config& c) { return c.algo[index].empty() ? std::string("(table)") : c.algo[index]; };
  return k;
}

// A file loaded when the environment is read, so a bad one fails cf_init
// naming the variable and the field, and nothing of it is applied.
template <typename T>
Knob file_knob(const char* name, std::string Config::*path, std::shared_ptr<const T> Config::*loaded,
               bool (*load)(const std::string&, T*, std::string*), const char* doc) {
  Knob k = string_knob(name, "a file", path, "(none)", doc);
  k.parse = [name = k.name, path, loaded, load](const char* text, Config* c, std::string* error) {
    auto value = std::make_shared<T>();
    std::string why;
    if (!load(text, value.get(), &why)) {
      *error = name + ": " + why;
      return false;
    }
    c->*path = text;
    c->*loaded = std::move(value);
    return true;
  };
  return k;
}

// A variable the launcher sets and transports/bootstrap reads: listed, not parsed here.
Knob launcher_knob(const char* name, const char* range, const char* doc) {
  Knob k;
  k.name = name;
  k.range = range;
  k.doc = doc;
  k.show = [name = k.name](const Config&) {
    const char* text = std::getenv(name.c_str());
    return text == nullptr || *text == '\0' ? std::string("(unset)") : std::string(text);
  };
  return k;
}

// CF_FAULT=KIND:VALUE[,node=N].
Knob fault_knob() {
  Knob k;
  k.name = "CF_FAULT";
  k.range = "`kill_after:K`, `close_link:K`, `stop:S`, `delay:US` or `nomem:unexpected`, then optionally "
            "`,node=N`; or `nomem:cache`";
  k.doc = "fault injection for tests, on messages between processes: `kill_after:K` raises SIGKILL once K are "
          "sent, `close_link:K` closes the liveness connection to the lowest other node once K are sent, "
          "`stop:S` stops the process for S seconds at its first, `delay:US` delays each by US microseconds; "
          "`nomem:unexpected`: the node's first unexpected message finds no memory, so the node fails "
          "(`CF_ERR_NO_MEM`) and leaves the job (the others: `CF_ERR_PEER_LOST`); "
          "`node=N`: only node N; `nomem:cache`: each image's first schedule build fails with `CF_ERR_NO_MEM` (every node); unset: off";
  k.parse = [](const char* text, Config* c, std::string* error) {
    const std::string s = text;
    auto fail = [&](const std::string& why) {
      *error = "CF_FAULT='" + s + "': " + why;
      return false;
    };
    const size_t colon = s.find(':');
    if (colon == std::string::npos) return fail("expected KIND:VALUE[,node=N] (KIND kill_after, close_link, stop or delay)");
    const std::string kind = s.substr(0, colon);
    const size_t comma = s.find(',', colon);
    const std::string value = s.substr(colon + 1, comma == std::string::npos ? std::string::npos : comma - colon - 1);
    auto whole = [](const std::string& t, uint64_t max, uint64_t* out) {
      if (t.empty() || t.size() > 19 || t.find_first_not_of("0123456789") != std::string::npos) return false;
      *out = std::stoull(t);
      return *out <= max;
    };
    FaultSpec f;
    if (kind == "kill_after" || kind == "close_link") {
      f.kind = kind == "kill_after" ? FaultSpec::KillAfter : FaultSpec::CloseLink;
      if (!whole(value, k2p40, &f.value)) return fail(kind + " takes a message count in [0, 2^40]");
    } else if (kind == "stop") {
      f.kind = FaultSpec::Stop;
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || errno != 0 || *end != '\0' || !(v > 0) || v > 86400) {
        return fail("stop takes seconds in (0, 86400]");
      }
      f.value = static_cast<uint64_t>(v * 1000 + 0.5);
    } else if (kind == "delay") {
      f.kind = FaultSpec::Delay;
      if (!whole(value, 10000000, &f.value)) return fail("delay takes microseconds in [0, 10^7]");
    } else if (kind == "nomem") {
      if (value != "cache" && value != "unexpected") return fail("nomem takes 'cache' or 'unexpected'");
      f.kind = value == "cache" ? FaultSpec::NomemCache : FaultSpec::NomemUnexpected;
      if (f.kind == FaultSpec::NomemCache && comma != std::string::npos) {
        return fail("nomem:cache fails the same call on every image, so it takes no node");
      }
    } else {
      return fail("unknown kind '" + kind + "' (expected kill_after, close_link, stop, delay or nomem)");
    }
    if (comma != std::string::npos) {
      const std::string rest = s.substr(comma + 1);
      uint64_t node = 0;
      if (rest.rfind("node=", 0) != 0 || !whole(rest.substr(5), (uint64_t{1} << 31) - 2, &node)) {
        return fail("after the value only ',node=N' (N a node number)");
      }
      f.node = static_cast<int64_t>(node);
    }
    c->fault = f;
    return true;
  };
  k.show = [](const Config& c) {
    const FaultSpec& f = c.fault;
    std::string s;
    switch (f.kind) {
      case FaultSpec::None: return std::string("(off)");
      case FaultSpec::KillAfter: s = "kill_after:" + std::to_string(f.value); break;
      case FaultSpec::CloseLink: s = "close_link:" + std::to_string(f.value); break;
      case FaultSpec::Stop: s = "stop:" + seconds_text(f.value); break;
      case FaultSpec::Delay: s = "delay:" + std::to_string(f.value); break;
      case FaultSpec::NomemCache: s = "nomem:cache"; break;
      case FaultSpec::NomemUnexpected: s = "nomem:unexpected"; break;
    }
    if (f.node >= 0) s += ",node=" + std::to_string(f.node);
    return s;
  };
  return k;
}

std::vector<Knob> make_knobs() {
  using C = Config;
  std::vector<Knob> t = {
      uint_knob("CF_INPROC_EAGER_BYTES", 0, k2p20, &C::inproc_eager_bytes,
                "inproc: eager copy up to this size, single-copy above"),
      uint_knob("CF_INPROC_EAGER_CREDITS", 1, k2p20, &C::inproc_eager_credits,
                "inproc: unexpected eager messages held from one sender before it waits"),
      choice_knob<RingsMode>("CF_INPROC_RINGS", {{"auto", RingsMode::Auto}, {"1", RingsMode::On}, {"0", RingsMode::Off}},
                             &C::inproc_rings,
                             "inproc rings for small messages: `auto` = when images <= cores, `1` = always, `0` = never"),
      choice_knob<BindMode>("CF_BIND_IMAGES", {{"auto", BindMode::Auto}, {"none", BindMode::None}}, &C::bind_images,
                            "`auto`: `cf_run_images` binds each image thread to its own share of the process's "
                            "CPUs when the images are no more than those CPUs (as cfrun binds processes); "
                            "`none`: the scheduler places them"),
      uint_knob("CF_INPROC_FASTBOX_BYTES", 0, 8192, &C::inproc_fastbox_bytes,
                "inproc: per-VC ring for messages up to this size, when images <= cores (0 = off)"),
      with_rule(uint_knob("CF_SEGMENT_BYTES", 0, k2p40, &C::segment_bytes,
                          "pipelined algorithms cut messages into segments of this size (0 = off)"),
                "not 1..63",
                [](const Config& c, std::string* error) {
                  if (c.segment_bytes == 0 || c.segment_bytes >= 64) return true;
                  *error = "CF_SEGMENT_BYTES=" + std::to_string(c.segment_bytes) +
                           ": must be 0 (no segmentation) or at least 64";
                  return false;
                }),
      uint_knob("CF_ALLREDUCE_RING_BYTES", 0, k2p40, &C::allreduce_ring_bytes,
                "default allreduce: recursive doubling below, reduce_bcast at or above"),
      uint_knob("CF_ALLREDUCE_SPLIT_BYTES", 0, k2p40, &C::allreduce_split_bytes,
                "default allreduce when images <= cores: rabenseifner at or above"),
      uint_knob("CF_ALLREDUCE_PAIR_BYTES", 0, k2p40, &C::allreduce_pair_bytes,
                "default allreduce of two images that fit the cores: recursive doubling below, rabenseifner at or above"),
      uint_knob("CF_REDUCE_LARGE_BYTES", 0, k2p40, &C::reduce_large_bytes,
                "scan, reduce_scatter: latency algorithms below, bandwidth algorithms at or above"),
      with_rule(uint_knob("CF_DATA_ALIGNMENT", 1, 4096, &C::data_alignment,
                          "computational collectives: buffers aligned to min(elem_size's power of two, this)"),
                "a power of two",
                [](const Config& c, std::string* error) {
                  if ((c.data_alignment & (c.data_alignment - 1)) == 0) return true;
                  *error = "CF_DATA_ALIGNMENT=" + std::to_string(c.data_alignment) + ": must be a power of two";
                  return false;
                }),
      uint_knob("CF_BROADCAST_LARGE_BYTES", 0, k2p40, &C::broadcast_large_bytes,
                "default broadcast on P > 2: knomial below, flat at or above"),
      uint_knob("CF_ROOTED_TREE_BYTES", 0, k2p40, &C::rooted_tree_bytes,
                "default scatter / gather: binomial below this block size, flat at or above"),
      uint_knob("CF_GATHER_ALL_SMALL_BYTES", 0, k2p40, &C::gather_all_small_bytes,
                "default gather_all: recursive_doubling or bruck below this block size, direct at or above"),
      uint_knob("CF_EXCHANGE_SMALL_BYTES", 0, k2p40, &C::exchange_small_bytes,
                "default exchange: bruck below this block size, pairwise at or above"),
      uint_knob("CF_ALLREDUCE_DIRECT_BYTES", 0, k2p40, &C::allreduce_direct_bytes,
                "default allreduce when processes outnumber cores: direct below this size"),
      uint_knob("CF_REDUCE_SCATTER_DIRECT_BYTES", 0, k2p40, &C::reduce_scatter_direct_bytes,
                "default reduce_scatter when processes outnumber cores: direct below this block size"),
      uint_knob("CF_TREE_RADIX", 2, 64, &C::tree_radix, "k of the knomial broadcast and kary barrier"),
      uint_knob("CF_EXCHANGE_WINDOW", 1, 65536, &C::exchange_window,
                "windowed exchange: messages in flight per image"),
      with_rule(uint_knob("CF_LOGP_L", 0, 1000000000, &C::logp_L, "logp broadcast: latency L, ns"),
                "L + O + G > 0",
                [](const Config& c, std::string* error) {
                  if (uint64_t{c.logp_L} + c.logp_o + c.logp_g != 0) return true;
                  *error = "CF_LOGP_L, CF_LOGP_O, CF_LOGP_G: may not all be 0";
                  return false;
                }),
      uint_knob("CF_LOGP_O", 0, 1000000000, &C::logp_o, "logp broadcast: per-message overhead o, ns"),
      uint_knob("CF_LOGP_G", 0, 1000000000, &C::logp_g, "logp broadcast: gap g between sends, ns"),
      file_knob<LogGPModel>("CF_MODEL", &C::model_file, &C::model, &load_model_file,
                            "a LogGP model file (`carflow calibrate`): the default choice becomes the registered "
                            "algorithm with the least predicted time, and the logp broadcast takes L, o, g from it"),
      file_knob<TuningTable>("CF_TUNING", &C::tuning_file, &C::tuning, &load_tuning_file,
                             "a selection table (`carflow tune`): its choices for the team size it was made for "
                             "come before `CF_MODEL` and the default table"),
  };
  for (int k = 0; k < kCollKinds; ++k) t.push_back(algo_knob(static_cast<CollKind>(k)));
  const std::vector<Knob> rest = {
      choice_knob<ProgressMode>(
          "CF_PROGRESS", {{"poll", ProgressMode::Poll}, {"thread", ProgressMode::Thread}, {"block", ProgressMode::Block}},
          &C::progress,
          "`poll` (waiters poll, yield, block), `thread` (plus a progress thread while collectives are live), "
          "`block` (waiters block at once)"),
      string_knob("CF_OFI_PROVIDER", "a libfabric provider", &C::ofi_provider, "(auto)",
                  "libfabric provider between processes; unset: `shm` on one host, else `tcp;ofi_rxm`"),
      string_knob("CF_PLUGINS", "paths separated by `:`", &C::plugins, "(none)",
                  "generator plug-ins `cf_init` loads (each exports `cf_plugin_init`; carflow/generator.h)"),
      string_knob("CF_TRACE", "a directory", &C::trace_dir, "(off)",
                  "write when each CAR was ready, started and done, as Chrome trace-event JSON files in this "
                  "directory (`carflow trace merge`, `carflow view`; engine/README.md)"),
      uint_knob("CF_SCHEDULE_CACHE_BYTES", 0, k2p40, &C::schedule_cache_bytes,
                "schedules (compiled DAGs and their call state) an image keeps, in bytes; past it the temp "
                "buffers of idle calls are freed (allocated again when the call comes back), then the least used "
                "schedules since the last trim are dropped and built again when needed; 0: no bound"),
      off_when_zero(seconds_knob("CF_HANG_DUMP_S", &C::hang_dump_ms,
                   "a collective outstanding this long is reported: a line per waiting image on stderr and its "
                   "DAG with each CAR's state as graph JSON (in `CF_TRACE`'s directory, else the working one); "
                   "SIGUSR1 reports every outstanding one at once; unset: off")),
      uint_knob("CF_TRACE_EVENTS", 1, uint64_t{1} << 26, &C::trace_events,
                "with `CF_TRACE`: CARs recorded per image (64 bytes each, allocated at start); later ones are counted, not kept"),
      uint_knob("CF_EAGER_BYTES", 0, k2p20, &C::eager_bytes,
                "between processes via libfabric: eager up to this size, rendezvous (receiver reads) above"),
      uint_knob("CF_OFI_CREDITS", 1, 4096, &C::ofi_credits,
                "between processes: eager / RTS messages a node may have in flight to one peer node"),
      uint_knob("CF_OFI_UNEXPECTED_BYTES", 0, k2p40, &C::ofi_unexpected_bytes,
                "between processes: unexpected data held before senders are throttled"),
      uint_knob("CF_HOST_RINGS", 0, 1, &C::host_rings,
                "processes of one host: shared-memory rings and streams (0 = libfabric only)"),
      uint_knob("CF_HOST_SPLIT_BYTES", 0, k2p40, &C::host_split_bytes,
                "processes of one host with a core each: both sides copy a message this large (0 = never)"),
      seconds_knob("CF_PEER_TIMEOUT", &C::peer_timeout_ms,
                   "a dead or unreachable peer fails waits with `CF_ERR_PEER_LOST` within this time "
                   "(unreachable host: whole seconds, >= 2)"),
      seconds_knob("CF_EXIT_TIMEOUT", &C::exit_timeout_ms,
                   "`cf_finalize`'s exit fence, and cfrun's grace before ending the others"),
      uint_knob("CF_CHECK", 0, 1, &C::check,
                "1 = check that single-valued arguments agree; forces `IN_ALLSYNC`; same in every process"),
      fault_knob(),
      uint_knob("CF_SPIN_COUNT", 0, 100000000, &C::spin_count, "waits poll this many times, then yield"),
      uint_knob("CF_YIELD_COUNT", 0, 100000000, &C::yield_count, "then yield this many times, then block"),
      uint_knob("CF_MPI_VERBOSE", 0, 1, &C::mpi_verbose,
                "libcarflow_mpi: 1 = say once why the layer leaves every call to MPI"),
      uint_knob("CF_MPI_REPORT", 0, 1, &C::mpi_report,
                "libcarflow_mpi: 1 = at `MPI_Finalize` each rank prints per collective its calls on carflow and on MPI, and why"),
      launcher_knob("CF_RANK", "0..CF_NODES-1", "this process's node number"),
      launcher_knob("CF_NODES", "1..2^31-1", "the number of processes (nodes) in the job"),
      launcher_knob("CF_KVS", "HOST:PORT", "the launcher's store; unset: a single node, or PMIx under mpirun / srun"),
      launcher_knob("CF_IMAGES", "1..65536",
                    "images per process (`cfrun --images`); under mpirun / srun set it yourself"),
  };
  t.insert(t.end(), rest.begin(), rest.end());
  const Config defaults;
  for (Knob& k : t) k.fallback = k.set_by_launcher() ? "(set by cfrun)" : k.show(defaults);
  return t;
}

// A markdown table cell: '|' escaped.
std::string cell(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += '\\';
    out += ch;
  }
  return out;
}

}  // namespace

std::string Config::algo_variable(CollKind kind) {
  std::string name = std::string("CF_ALGO_") + coll_kind_name(kind);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

const std::vector<Knob>& Config::knobs() {
  static const std::vector<Knob> table = make_knobs();
  return table;
}

bool Config::from_env(Config* out, std::string* error) {
  Config c;
  for (const Knob& k : knobs()) {
    if (k.set_by_launcher()) continue;
    const char* text = std::getenv(k.name.c_str());
    if (text == nullptr || *text == '\0') continue;
    if (!k.parse(text, &c, error)) return false;
  }
  for (const Knob& k : knobs()) {
    if (k.check && !k.check(c, error)) return false;
  }
  *out = c;
  return true;
}

std::vector<KnobValue> Config::describe() const {
  std::vector<KnobValue> rows;
  for (const Knob& k : knobs()) rows.push_back({k.name, k.show(*this), k.range, k.doc});
  return rows;
}

std::vector<std::string> Config::markdown_table() {
  std::vector<std::string> lines = {"| Name | Default | Range | What it does |", "|---|---|---|---|"};
  for (const Knob& k : knobs()) {
    lines.push_back("| `" + k.name + "` | " + cell(k.fallback) + " | " + cell(k.range) + " | " + cell(k.doc) + " |");
  }
  return lines;
}

}  // namespace carflow
