#include "backends/native/memory_refusal.h"

#include <cerrno>
#include <string_view>

namespace pulsebox::backends::native {

bool is_memory_refusal(const runtime::ChildMessage& error) {
  const std::string_view stage(error.stage);
  const int err = error.error_number;
  if (stage == runtime::kExecutingStage) return err == ENOMEM || err == E2BIG;
  if (err == ENOMEM || err == ENOBUFS || err == ENOSPC) return true;
  return err == EINVAL && stage.starts_with("mounting overlay on ");
}

}  // namespace pulsebox::backends::native
