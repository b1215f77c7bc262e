// libfabric, loaded when a job first needs it. Linking it would load its
// providers' libraries at every start of every carflow program, and one of
// them (Debian's libinfinipath, behind the psm provider) spends about
// 0.2 s in a constructor before main. Only five of libfabric's entry
// points are functions; the rest are inline calls through the objects they
// return. Those five are renamed here to shims (fabric_lib.cc) that open
// libfabric.so.1 at their first call, so every source includes libfabric's
// headers through this one, before anything else includes them.
#pragma once

#include <string>

#define fi_getinfo cf_internal_fi_getinfo
#define fi_freeinfo cf_internal_fi_freeinfo
#define fi_dupinfo cf_internal_fi_dupinfo
#define fi_fabric cf_internal_fi_fabric
#define fi_strerror cf_internal_fi_strerror

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

namespace carflow {

// Opens libfabric.so.1 once (thread-safe); false with *error naming the
// library and the loader's reason when it cannot, after which the shims
// answer -FI_ENOSYS.
bool load_libfabric(std::string* error);

}  // namespace carflow
