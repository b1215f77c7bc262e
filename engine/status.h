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

}  // namespace carflow
