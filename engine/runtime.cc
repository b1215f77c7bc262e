#include "engine/runtime.h"

#include "engine/status.h"

namespace carflow {

Runtime& Runtime::get() {
  static Runtime runtime;
  return runtime;
}

int Runtime::init(std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (initialized_.load()) {
    *error = "cf_init: already called in this process (one call per process)";
    return kErrBadArg;
  }
  if (!Config::from_env(&config_, error)) return kErrBadArg;
  initialized_.store(true, std::memory_order_release);
  return kOk;
}

int Runtime::finalize(std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!initialized_.load()) {
    *error = "cf_finalize: cf_init was not called";
    return kErrNotInit;
  }
  engine_.reset();
  attached_.clear();
  images_.store(0);
  initialized_.store(false, std::memory_order_release);
  return kOk;
}

int Runtime::begin_run(uint32_t n, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (engine_ != nullptr) {
    *error = "cf_run_images: images already exist on this node (a run in progress, or "
             "cf_coll_init called by the program's own threads)";
    return kErrBadArg;
  }
  engine_ = std::make_unique<Engine>(n, config_);
  attached_.assign(n, false);
  images_.store(n, std::memory_order_release);
  return kOk;
}

void Runtime::end_run() {
  std::lock_guard<std::mutex> lock(mutex_);
  engine_.reset();
  attached_.clear();
  images_.store(0, std::memory_order_release);
}

int Runtime::attach(uint32_t images, uint32_t my_image, std::vector<ClientFunction> table,
                    ImageContext** out, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (engine_ == nullptr) {
    engine_ = std::make_unique<Engine>(images, config_);
    attached_.assign(images, false);
    images_.store(images, std::memory_order_release);
  }
  if (engine_->images() != images) {
    *error = "images: " + std::to_string(images) + " images on this node, but other images said " +
             std::to_string(engine_->images());
    return kErrBadArg;
  }
  if (my_image >= images) {
    *error = "my_image: " + std::to_string(my_image) + " is not an image of this node (0.." +
             std::to_string(images - 1) + ")";
    return kErrBadArg;
  }
  if (attached_[my_image]) {
    *error = "my_image: image " + std::to_string(my_image) + " was already initialized by another thread";
    return kErrBadArg;
  }
  attached_[my_image] = true;
  ImageContext& img = engine_->image(my_image);
  img.fn_table = std::move(table);
  *out = &img;
  return kOk;
}

}  // namespace carflow
