// What the runtime needs from whatever started the job: this process's rank
// among the nodes, a key-value exchange for endpoint addresses, fences, a
// goodbye, and notices of lost peers. Two implementations: cfrun's store
// (bootstrap.h) and PMIx under mpirun / srun (pmix_store.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace carflow {

class JobStore {
 public:
  using LostCallback = std::function<void(uint32_t rank, const std::string& how)>;
  static constexpr uint32_t kLauncherRank = UINT32_MAX;  // on_lost's rank for "launcher gone"

  virtual ~JobStore() = default;
  virtual uint32_t rank() const = 0;
  virtual uint32_t nodes() const = 0;
  virtual uint32_t images_per_node() const = 0;  // CF_IMAGES, 0 when not given
  // Keys this runtime uses end in ".<rank>" of the node that puts them.
  virtual bool put(const std::string& key, const std::string& value, std::string* error) = 0;
  virtual bool get(const std::string& key, std::string* value, int timeout_ms, std::string* error) = 0;
  virtual bool fence(int timeout_ms, std::string* error) = 0;  // all ranks
  virtual bool bye(std::string* error) = 0;                    // the job may end cleanly
  // This process cannot go on (`why`, e.g. "ran out of memory: ..."): the
  // launcher reports it. Returns at once, from any thread. PMIx has no such
  // report: under mpirun / srun the process's own stderr line is the report.
  virtual void leave(const std::string& why) {}
  virtual void watch(LostCallback on_lost) = 0;
  // The IPv4 address this process reaches the launcher from (other nodes
  // can reach it there too); "" when the store has no socket (PMIx).
  virtual std::string local_ip() const { return ""; }
  // A key for `purpose` known only to the job's processes and never sent
  // (the liveness mesh's); "" when the store has none (PMIx: then the mesh
  // makes one and shares it through the store).
  virtual std::string derived_key(std::string_view purpose) const { return ""; }
};

}  // namespace carflow
