// Runtime: the one process-wide object (STYLE.md rule 6). It owns the
// configuration, the error mode and the Engine of the images on this node;
// everything else hangs off the Engine, so two runs never share state.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/engine.h"

namespace carflow {

class Runtime {
 public:
  static Runtime& get();

  int init(std::string* error);
  int finalize(std::string* error);
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }
  const Config& config() const { return config_; }

  std::atomic<int> error_mode{0};

  // Makes the calling thread image `my_image` of `images`; creates the Engine
  // on the first call. *out is the image's context.
  int attach(uint32_t images, uint32_t my_image, std::vector<ClientFunction> table,
             ImageContext** out, std::string* error);
  // cf_run_images: reserves the node for n images (fails if images exist).
  int begin_run(uint32_t n, std::string* error);
  // Frees the Engine after the run's threads have returned.
  void end_run();
  Engine* engine() { return engine_.get(); }
  uint32_t images() const { return images_.load(std::memory_order_acquire); }

 private:
  std::mutex mutex_;
  std::atomic<bool> initialized_{false};
  Config config_;
  std::unique_ptr<Engine> engine_;
  std::vector<bool> attached_;
  std::atomic<uint32_t> images_{0};
};

}  // namespace carflow
