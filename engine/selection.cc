#include "engine/selection.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/tuning.h"
#include "graph/model/predict.h"

namespace carflow {

// The largest DAG the model simulates to choose an algorithm; a larger
// one (an all-to-all at a large P) is not a candidate.
constexpr uint64_t kModelMaxCars = uint64_t{1} << 20;

SelectionTable::SelectionTable(const Config& config, uint32_t cores, uint32_t local_images,
                               uint32_t host_images)
    : config_(config),
      cores_(cores == 0 ? 1 : cores),
      local_images_(local_images),
      host_images_(host_images == 0 ? UINT32_MAX : host_images) {}

bool SelectionTable::forced(CollKind kind, const GeneratorInfo** out, std::string* error) const {
  const int k = static_cast<int>(kind);
  *out = forced_[k].load(std::memory_order_acquire);
  if (*out != nullptr || config_.algo[k].empty()) return true;
  const GeneratorRegistry& reg = GeneratorRegistry::instance();
  *out = reg.find(kind, config_.algo[k]);
  if (*out == nullptr) {
    *error = Config::algo_variable(kind) + "='" + config_.algo[k] + "': unknown " + coll_kind_name(kind) +
             " algorithm (valid: " + reg.names(kind) + ")";
    return false;
  }
  forced_[k].store(*out, std::memory_order_release);
  return true;
}

const GeneratorInfo* SelectionTable::get(CollKind kind, const char* name) const {
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(kind, name);
  if (gen == nullptr) {  // the table names only generators linked into the library
    std::fprintf(stderr, "carflow: internal error: no %s generator '%s'\n", coll_kind_name(kind), name);
    std::abort();
  }
  return gen;
}

const GeneratorInfo* SelectionTable::choose(CollKind kind, uint32_t images, uint64_t nbytes,
                                            uint32_t elem_size, bool commutative,
                                            uint32_t images_per_node, bool uniform) const {
  const GeneratorInfo* named = nullptr;
  std::string unknown;  // Engine::choose_algorithm reports it; here the table stands in
  if (forced(kind, &named, &unknown) && named != nullptr) return named;
  if (uniform && config_.tuning != nullptr) {
    const GeneratorInfo* gen = config_.tuning->find(kind, images, images_per_node, nbytes);
    if (gen != nullptr && (commutative || gen->preserves_order)) return gen;
  }
  if (uniform) {
    if (const GeneratorInfo* gen = model_choice(kind, images, nbytes, elem_size, commutative, images_per_node)) {
      return gen;
    }
  }
  return by_table(kind, images, nbytes, commutative, images_per_node);
}

size_t SelectionTable::ModelKeyHash::operator()(const ModelKey& k) const {
  uint64_t h = (uint64_t{k.images} << 32 | k.images_per_node) * 0x9e3779b97f4a7c15ull;
  h ^= (k.nbytes + (uint64_t{k.elem_size} << 40) + (static_cast<uint64_t>(k.kind) << 56) + k.commutative) *
       0xc2b2ae3d27d4eb4full;
  return static_cast<size_t>(h ^ (h >> 29));
}

const GeneratorInfo* SelectionTable::model_choice(CollKind kind, uint32_t images, uint64_t nbytes,
                                                  uint32_t elem_size, bool commutative,
                                                  uint32_t images_per_node) const {
  if (config_.model == nullptr || !model_ranks_kind(kind)) return nullptr;
  const ModelKey key{kind, commutative, images, images_per_node, elem_size, nbytes};
  {
    std::lock_guard<std::mutex> lock(model_mutex_);
    if (auto it = model_choices_.find(key); it != model_choices_.end()) return it->second;
  }
  // Predicted outside the lock: images that miss together compute the same
  // answer (the simulation is deterministic), and the first one stored wins.
  CollectiveSpec spec;
  spec.kind = kind;
  spec.images = images;
  spec.nbytes = nbytes;
  spec.elem_size = elem_size == 0 ? 1 : elem_size;
  spec.images_per_node = images_per_node;
  AlgorithmParams params;
  params.segment_bytes = config_.segment_bytes;
  params.radix = config_.tree_radix;
  params.window = config_.exchange_window;
  LogGPModel model = *config_.model;
  model.images_per_node = images_per_node;
  logp_from_model(model, images, &params);
  const std::vector<Prediction> predictions = predict_algorithms(spec, commutative, model, params, kModelMaxCars);
  const Prediction* best = fastest(predictions);
  const GeneratorInfo* gen = best != nullptr ? best->gen : nullptr;  // none: the default table
  std::lock_guard<std::mutex> lock(model_mutex_);
  return model_choices_.emplace(key, gen).first->second;
}

const GeneratorInfo* SelectionTable::by_table(CollKind kind, uint32_t images, uint64_t nbytes, bool commutative,
                                              uint32_t images_per_node) const {
  // Several nodes of several images: messages between nodes cost far more
  // than within one (Cray MPT notes section 5, SMP-aware collectives), so latency-
  // bound calls go through one leader per node.
  if (images_per_node > 1 && images_per_node < images) {
    const bool small = (kind == CollKind::Broadcast && nbytes < config_.broadcast_large_bytes) ||
                       kind == CollKind::Barrier ||
                       (kind == CollKind::Allreduce && nbytes < config_.allreduce_ring_bytes) ||
                       (kind == CollKind::GatherAll && nbytes < config_.gather_all_small_bytes);
    const GeneratorInfo* hier = GeneratorRegistry::instance().find(kind, "hierarchical");
    if (small && hier != nullptr && (commutative || hier->preserves_order)) return hier;
  }
  // The team's images on this host outnumber its cores.
  const bool oversubscribed = std::min(images, host_images_) > cores_;
  // Image threads of one process outnumber the cores: any thread moves any
  // image's messages there. Scan's chain and the k-ary barrier win in both
  // kinds of oversubscription.
  const bool threads_oversubscribed = std::min(images, local_images_) > cores_;
  // Processes outnumber the cores: a message moves only while its receiver
  // has a core, so every dependent round waits for the peer's next turn, and
  // one round of P-1 messages beats log2 P rounds for small blocks.
  const bool processes_oversubscribed = oversubscribed && !threads_oversubscribed;
  const bool power_of_two = (images & (images - 1)) == 0;
  switch (kind) {
    case CollKind::Broadcast:
      // Large: every receiver copies straight from the root's buffer
      // (single-copy), so the flat tree moves the data once, in parallel.
      if (images <= 2 || nbytes >= config_.broadcast_large_bytes) return get(kind, "flat");
      // A thread sharing its core serves its children one by one, so the
      // smallest fan-out wins when image threads outnumber the cores.
      return threads_oversubscribed ? get(kind, "binary") : get(kind, "knomial");
    case CollKind::Barrier:
      // Processes outnumbering the cores: one round; image threads sharing
      // cores: the fewest messages.
      if (processes_oversubscribed) return get(kind, "direct");
      return oversubscribed ? get(kind, "kary") : get(kind, "dissemination");
    case CollKind::Allreduce:
      // Binomial reduce + pipelined binomial broadcast sends the fewest
      // messages (2(P-1)): it takes large vectors when images share cores
      // (fewer messages count for more there than ring's or Rabenseifner's
      // bandwidth) and mid-size ones otherwise; recursive doubling's few
      // rounds take small vectors. With a core per image, Rabenseifner's
      // split of the reduction puts every core to work on large vectors.
      // All three keep operand order.
      //
      // Two images: recursive doubling's one exchange of the whole vector,
      // reduced on both sides, beats sending halves twice (Rabenseifner,
      // reduce_bcast) up to a few MiB: the second transfer pulls each
      // image's freshly reduced half out of the other core's cache, and the
      // next call's combine must take those lines back (two image threads,
      // 256 KiB: 10-13 us against Rabenseifner's 28-33; two processes, 64
      // KiB: 11.9 against reduce_bcast's 18.3). From there Rabenseifner's
      // halved reduction pays.
      if (images == 2 && !oversubscribed) {
        return nbytes < config_.allreduce_pair_bytes ? get(kind, "recursive_doubling") : get(kind, "rabenseifner");
      }
      if (!oversubscribed && nbytes >= config_.allreduce_split_bytes) return get(kind, "rabenseifner");
      if (processes_oversubscribed && nbytes < config_.allreduce_direct_bytes) return get(kind, "direct");
      return nbytes >= config_.allreduce_ring_bytes || threads_oversubscribed
                 ? get(kind, "reduce_bcast")
                 : get(kind, "recursive_doubling");
    case CollKind::Scatter:
      // Processes outnumbering the cores: the root's sends need no other
      // process to run first.
      if (processes_oversubscribed) return get(kind, "flat");
      return nbytes < config_.rooted_tree_bytes ? get(kind, "binomial") : get(kind, "flat");
    case CollKind::Gather:
      // Gather keeps its tree oversubscribed too: flat's root would wait on
      // every sender, and they share the cores.
      return nbytes < config_.rooted_tree_bytes ? get(kind, "binomial") : get(kind, "flat");
    case CollKind::GatherAll:
      if (nbytes >= config_.gather_all_small_bytes || processes_oversubscribed) return get(kind, "direct");
      // Threads sharing cores: gather to one image and a binomial release
      // (the node-aware generator on one node) sends 2(P-1) messages to
      // recursive doubling's P log2 P.
      if (threads_oversubscribed) return get(kind, "hierarchical");
      return power_of_two ? get(kind, "recursive_doubling") : get(kind, "bruck");
    case CollKind::Exchange:
      // Two images: one partner, nothing for Bruck to pack; pairwise
      // receives straight into the destination (no temp and unpack COPY).
      if (images <= 2 || processes_oversubscribed) return get(kind, "pairwise");
      return nbytes < config_.exchange_small_bytes ? get(kind, "bruck") : get(kind, "pairwise");
    case CollKind::Permute:
      return get(kind, "direct");
    case CollKind::ReduceVec:
      // The two-sided binomial tree: P-1 messages per segment, pipelined,
      // so segments stream through it with fewer messages than
      // Rabenseifner's halving and gather.
      return get(kind, "binomial");
    case CollKind::Scan:
      // The chain sends P-1 messages: best when images share cores, and for
      // large vectors (pipelined); dissemination's log P rounds otherwise.
      return nbytes >= config_.reduce_large_bytes || oversubscribed ? get(kind, "linear")
                                                                    : get(kind, "dissemination");
    case CollKind::ReduceScatter:
      // Two images: the ring's one step (SEND, own block, RECV_REDUCE) is
      // recursive halving's exchange without its packing copies.
      if (images <= 2) return order_safe(get(kind, "ring"), commutative, "direct");
      // Processes outnumbering the cores: one round, as for allreduce, up
      // to the block size from which the ring's bandwidth wins.
      if (processes_oversubscribed && nbytes < config_.reduce_scatter_direct_bytes) return get(kind, "direct");
      // nbytes is one block: the whole vector is P blocks.
      return order_safe(nbytes * images >= config_.reduce_large_bytes ? get(kind, "ring")
                                                                      : get(kind, "recursive_halving"),
                        commutative, "direct");
    case CollKind::Reduce:
      return commutative ? get(kind, "scalar") : get(kind, "rows");
    case CollKind::PrefixReduce:
      return get(kind, "dissemination");
  }
  return nullptr;
}

const GeneratorInfo* SelectionTable::order_safe(const GeneratorInfo* gen, bool commutative,
                                                const char* fallback) const {
  return commutative || gen->preserves_order ? gen : get(gen->kind, fallback);
}

}  // namespace carflow
