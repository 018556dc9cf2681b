// `run` (design §1.7): create and start in one process, which stays the
// container's parent, waits for it and deletes it. Signals are not
// forwarded yet: an engine stops a container with `kill ID`, which reaches
// the process through its pidfd whether `run` waits or not.
#include <sys/wait.h>

#include <cerrno>

#include "oci/commands/commands.h"

namespace pulsebox::oci::commands {

core::Result<int> run(StateStore& store, const CreateOptions& options, bool detach, bool keep) {
  PB_TRY(created, create(store, options));
  if (auto started = start(store, options.id); !started.ok()) {
    (void)remove(store, options.id, true);
    return std::move(started).error();
  }
  if (detach) return 0;
  siginfo_t info{};
  int rc = 0;
  do {
    rc = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(created.process.pidfd()), &info,
                  WEXITED);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return core::Error::from_errno("oci", "waiting for container " + options.id);
  const int status = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  if (!keep) PB_CHECK(remove(store, options.id, true));
  return status;
}

}  // namespace pulsebox::oci::commands
