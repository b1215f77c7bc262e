// Status codes shared by engine and API (the API's CF_* values).
#pragma once

namespace carflow {

enum Status : int {
  kOk = 0,
  kNotReady = 1,
  kErrBadArg = -1,
  kErrNotInit = -2,
  kErrNoMem = -3,
  kErrTransport = -4,
  kErrPeerLost = -5,
  kErrTimeout = -6,
  kErrMismatch = -7,
};

// The status's CF_* name (cf_strerror's text), for messages of either layer.
inline const char* status_name(int status) {
  switch (status) {
    case kOk: return "CF_OK";
    case kNotReady: return "CF_NOT_READY";
    case kErrBadArg: return "CF_ERR_BAD_ARG";
    case kErrNotInit: return "CF_ERR_NOT_INIT";
    case kErrNoMem: return "CF_ERR_NO_MEM";
    case kErrTransport: return "CF_ERR_TRANSPORT";
    case kErrPeerLost: return "CF_ERR_PEER_LOST";
    case kErrTimeout: return "CF_ERR_TIMEOUT";
    case kErrMismatch: return "CF_ERR_MISMATCH";
    default: return "CF_ERR_UNKNOWN";
  }
}

}  // namespace carflow
