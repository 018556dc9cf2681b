// The state directory's one rule beyond its ownership: never a system
// directory (see backends/native_runtime.h).
#include <cstdlib>
#include <string>

#include "backends/native_runtime.h"
#include "core/system_dirs.h"
#include "core/throw_error.h"

namespace pulsebox::backends {

void check_state_dir(const std::filesystem::path& dir, bool allowed) {
  if (allowed) return;
  const char* forced = std::getenv("PULSEBOX_ALLOW_SYSTEM_STATE_DIR");
  if (forced != nullptr && std::string(forced) == "1") return;
  const auto reason = core::system_directory_reason(dir);
  if (!reason) return;
  core::throw_error(core::Error(
      core::ErrorKind::kSecurity, "native",
      "the state directory " + dir.string() + " is a system directory (" + *reason +
          "); set PULSEBOX_STATE_DIR to a directory of pulsebox's own, or set "
          "PULSEBOX_ALLOW_SYSTEM_STATE_DIR=1 (C++: NativeBackendOptions::allow_system_state_dir) "
          "to use it anyway"));
}

}  // namespace pulsebox::backends
