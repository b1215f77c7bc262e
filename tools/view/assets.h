// The viewer's page parts (tools/view/: template, style, scripts, and the
// vendored graph library), compiled into the binary by embed.cc so that an
// installed `carflow view` needs no files beside it.
#pragma once

#include <string_view>

namespace carflow::view {

// The file `name` (its base name, e.g. "view.js") as embedded; empty when
// no such file was embedded.
std::string_view asset(std::string_view name);

}  // namespace carflow::view
