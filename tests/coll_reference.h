// The sequential references of graph/reference.h under the tests' name.
#pragma once

#include "graph/reference.h"

namespace carflow::testref {
using namespace carflow::reference;
}  // namespace carflow::testref
