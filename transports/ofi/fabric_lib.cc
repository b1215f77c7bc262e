#include "transports/ofi/fabric_lib.h"

#include <dlfcn.h>

#include <mutex>

namespace carflow {
namespace {

// The versions this code was written against (the symbol versions a link
// with -lfabric binds); a libfabric without them is asked for its default.
struct Entry {
  const char* name;
  const char* version;
};
constexpr Entry kGetinfo{"fi_getinfo", "FABRIC_1.3"}, kFreeinfo{"fi_freeinfo", "FABRIC_1.3"},
    kDupinfo{"fi_dupinfo", "FABRIC_1.3"}, kFabric{"fi_fabric", "FABRIC_1.1"}, kStrerror{"fi_strerror", "FABRIC_1.0"};

struct Library {
  std::once_flag once;
  bool ok = false;
  std::string error;
  decltype(&fi_getinfo) getinfo = nullptr;
  decltype(&fi_freeinfo) freeinfo = nullptr;
  decltype(&fi_dupinfo) dupinfo = nullptr;
  decltype(&fi_fabric) fabric = nullptr;
  decltype(&fi_strerror) strerror = nullptr;
};

Library& library() {
  static Library lib;  // the process's one libfabric, as a link would give
  std::call_once(lib.once, [] {
    void* handle = ::dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      lib.error = std::string("cannot load libfabric.so.1 (install libfabric1): ") + (why ? why : "unknown reason");
      return;
    }
    const auto find = [&](const Entry& e) -> void* {
      void* f = ::dlvsym(handle, e.name, e.version);
      return f != nullptr ? f : ::dlsym(handle, e.name);
    };
    lib.getinfo = reinterpret_cast<decltype(lib.getinfo)>(find(kGetinfo));
    lib.freeinfo = reinterpret_cast<decltype(lib.freeinfo)>(find(kFreeinfo));
    lib.dupinfo = reinterpret_cast<decltype(lib.dupinfo)>(find(kDupinfo));
    lib.fabric = reinterpret_cast<decltype(lib.fabric)>(find(kFabric));
    lib.strerror = reinterpret_cast<decltype(lib.strerror)>(find(kStrerror));
    lib.ok = lib.getinfo && lib.freeinfo && lib.dupinfo && lib.fabric && lib.strerror;
    if (!lib.ok) lib.error = "libfabric.so.1 lacks fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric or fi_strerror";
  });
  return lib;
}

}  // namespace

bool load_libfabric(std::string* error) {
  Library& lib = library();
  if (!lib.ok) *error = lib.error;
  return lib.ok;
}

}  // namespace carflow

// The shims (hidden: the library's own, not part of its interface).
#define CF_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

CF_HIDDEN int cf_internal_fi_getinfo(uint32_t version, const char* node, const char* service, uint64_t flags,
                                     const struct fi_info* hints, struct fi_info** info) {
  carflow::Library& lib = carflow::library();
  return lib.ok ? lib.getinfo(version, node, service, flags, hints, info) : -FI_ENOSYS;
}

CF_HIDDEN void cf_internal_fi_freeinfo(struct fi_info* info) {
  carflow::Library& lib = carflow::library();
  if (lib.ok) lib.freeinfo(info);
}

CF_HIDDEN struct fi_info* cf_internal_fi_dupinfo(const struct fi_info* info) {
  carflow::Library& lib = carflow::library();
  return lib.ok ? lib.dupinfo(info) : nullptr;
}

CF_HIDDEN int cf_internal_fi_fabric(struct fi_fabric_attr* attr, struct fid_fabric** fabric, void* context) {
  carflow::Library& lib = carflow::library();
  return lib.ok ? lib.fabric(attr, fabric, context) : -FI_ENOSYS;
}

CF_HIDDEN const char* cf_internal_fi_strerror(int errnum) {
  carflow::Library& lib = carflow::library();
  return lib.ok ? lib.strerror(errnum) : "libfabric is not loaded";
}

}  // extern "C"
