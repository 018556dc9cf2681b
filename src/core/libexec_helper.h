// Finds one of pulsebox's helper programs (pulsebox-nft, pulsebox-http):
// beside the running executable or in `build_subdir` next to its directory
// (the build tree), else in PULSEBOX_LIBEXEC_DIR (installed).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pulsebox::core {

// Only a regular file owned by root or this user (or, in a user namespace
// that does not map root, the overflow uid) that nobody else may write is
// returned: the helper runs with this process's privileges. `stage` names
// the component in errors.
Result<std::string> find_libexec_helper(std::string_view name, std::string_view build_subdir,
                                        std::string_view stage);

// Replaces this process with argv[0] run with `argv` (execv); returns only
// when that failed, with errno set.
void exec_program(std::vector<std::string> argv);

}  // namespace pulsebox::core
