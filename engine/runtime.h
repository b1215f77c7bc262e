// Runtime: the one process-wide object (no other global mutable state). It owns the
// configuration, the error mode and the Engine of the images on this node;
// everything else hangs off the Engine, so two runs never share state.
#pragma once

#include <sched.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/engine.h"

namespace carflow {

class JobStore;
class LivenessMesh;
class OfiTransport;

class Runtime {
 public:
  // Never destroyed: a process that calls exit() (or whose peer's loss
  // ends it) runs static destructors while image threads, the bootstrap's
  // reader and the liveness thread may still use the runtime; destroying it
  // then would pull the transports from under them. The OS reclaims it at
  // exit; cf_finalize is what tears things down in order. Inline: every
  // API call asks for it, and once it exists that is one load.
  static Runtime& get() {
    Runtime* runtime = instance_.load(std::memory_order_acquire);
    return runtime != nullptr ? *runtime : make();
  }
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Launched by cfrun (CF_KVS in the environment) or by a PMIx launcher
  // (mpirun, srun: PMIX_NAMESPACE) with more than one node: joins the job's
  // store, opens the libfabric endpoint, and exchanges addresses with every node.
  int init(std::string* error);
  // Collective over nodes and quiet: waits for this node's sends to leave,
  // meets every node at a fence (CF_EXIT_TIMEOUT), says goodbye to every
  // node's liveness link and to cfrun.
  int finalize(std::string* error);
  uint32_t node() const { return node_; }
  uint32_t nodes() const { return nodes_; }
  OfiTransport* ofi() { return ofi_.get(); }
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }
  // get().initialized() for a caller that holds an image (so the runtime
  // exists, or it would hold none): no path that creates it.
  // One load: the runtime is the process's one instance (instance_), so
  // its state is a static too.
  static bool live() { return initialized_.load(std::memory_order_acquire); }
  const Config& config() const { return config_; }

  std::atomic<int> error_mode{0};

  // Makes the calling thread image `my_image` of `images`; creates the Engine
  // on the first call. *out is the image's context.
  // counts[n]: images of node n (cf_coll_init's `images`); my_image is global.
  int attach(const std::vector<uint32_t>& counts, uint32_t my_image,
             std::vector<ClientFunction> table, ImageContext** out, std::string* error);
  // cf_run_images: reserves the node for n images (fails if images exist);
  // every node runs n images.
  int begin_run(uint32_t n, std::string* error);
  // Frees the Engine after the run's threads have returned.
  void end_run();
  // The CPUs of each of cf_run_images' n image threads (transports/bootstrap/
  // cpu_shares.h); empty, so left unbound, with CF_BIND_IMAGES=none.
  std::vector<cpu_set_t> image_cpu_shares(uint32_t n) const;
  Engine* engine() { return engine_.get(); }
  uint32_t images() const { return images_.load(std::memory_order_acquire); }
  // Loads plug-in libraries (a ':' list) not loaded yet, as CF_PLUGINS does
  // in init: the CLI's --plugin. Errors start with `origin`.
  bool add_plugins(const std::string& list, const std::string& origin, std::string* error) {
    std::lock_guard<std::mutex> lock(mutex_);
    return load_plugins(list, origin, error);
  }

 private:
  // Loads the CF_PLUGINS libraries not loaded yet; false with *error.
  bool load_plugins(const std::string& list, const std::string& origin, std::string* error);
  Runtime();  // out of line: the members' types are complete only there
  int connect_nodes(std::string* error);  // under mutex_
  bool start_liveness(bool one_host, std::string* error);  // under mutex_
  void peer_lost(uint32_t node, const std::string& how);
  // This node failed (Engine::on_node_failure): it leaves the job.
  void leave_job(const std::string& why);
  static void at_exit();
  std::unique_ptr<Engine> make_engine(const std::vector<uint32_t>& counts);  // under mutex_
  void install_engine(std::unique_ptr<Engine> engine);                     // under mutex_

  std::mutex mutex_;
  static constinit inline std::atomic<bool> initialized_{false};
  static Runtime& make();  // the first get(): creates the runtime once
  static constinit inline std::atomic<Runtime*> instance_{nullptr};
  std::unique_ptr<JobStore> boot_;  // cfrun's store, or PMIx; nullptr = one node
  std::unique_ptr<OfiTransport> ofi_;
  // Finds lost peers without the launcher (transports/liveness); its poll
  // thread calls peer_lost like the bootstrap's watcher does.
  std::unique_ptr<LivenessMesh> liveness_;
  uint32_t node_ = 0, nodes_ = 1;
  std::vector<bool> same_host_;  // by node: on this host (same name and network namespace)
  // Taken after mutex_, and alone by the bootstrap's watcher thread (which
  // finalize joins while holding mutex_): guards lost_ and every change of
  // engine_ and ofi_.
  std::mutex lost_mutex_;
  std::string lost_;  // why a node was lost, once one was
  bool exiting_ = false;  // exit() with images running: losses are no longer reported
  // leave_job ran: finalize waits for nobody, as after a loss. Not under
  // lost_mutex_, which finalize holds while the engine (whose threads may
  // be in leave_job) goes.
  std::atomic<bool> left_job_{false};
  std::vector<std::string> plugins_;  // CF_PLUGINS libraries loaded (never unloaded)
  bool launched_ = false;  // a launcher's job was joined (cf_init once per process then)
  bool running_ = false;   // between begin_run and end_run: cf_finalize must wait
  Config config_;
  std::unique_ptr<Engine> engine_;
  std::vector<bool> attached_;
  std::atomic<uint32_t> images_{0};
};

}  // namespace carflow
