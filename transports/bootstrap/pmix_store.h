// The job store under mpirun (Open MPI) or srun: PMIx (libpmix) gives the
// rank and job size, and its put / commit / fence / get exchange carries the
// endpoint addresses, so `mpirun -np 4 ./prog` needs no carflow launcher.
//
// PMIx data becomes visible to other processes at a fence that collects it:
// get() first commits and fences (collectively) when this process put keys
// since the last fence. The runtime's exchange (put a key, then get every
// node's) is the same sequence on every node, so those fences line up.
// Lost peers: PMIx's abort / termination / lost-connection events.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "transports/bootstrap/job_store.h"

namespace carflow {

class PmixStore final : public JobStore {
 public:
  // nullptr with *error empty when the process was not started by a PMIx
  // launcher (no PMIX_NAMESPACE / PMIX_RANK); *error set when PMIx fails.
  static std::unique_ptr<PmixStore> from_env(std::string* error);
  ~PmixStore() override;

  uint32_t rank() const override { return rank_; }
  uint32_t nodes() const override { return nodes_; }
  uint32_t images_per_node() const override { return images_per_node_; }
  bool put(const std::string& key, const std::string& value, std::string* error) override;
  bool get(const std::string& key, std::string* value, int timeout_ms, std::string* error) override;
  bool fence(int timeout_ms, std::string* error) override;
  bool bye(std::string* error) override;
  void watch(LostCallback on_lost) override;

 private:
  PmixStore() = default;
  bool flush(int timeout_ms, std::string* error);  // commit + collecting fence, if puts are pending
  static void on_event(size_t id, int status, const void* source, void* info, size_t ninfo,
                       void* results, size_t nresults, void* cbfunc, void* cbdata);

  uint32_t rank_ = 0, nodes_ = 1, images_per_node_ = 0;
  std::string nspace_;
  std::mutex mutex_;
  bool pending_ = false;  // puts since the last fence
  LostCallback on_lost_;
};

}  // namespace carflow
