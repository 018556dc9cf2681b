// `run` (design §1.7): create and start in one process, which stays the
// container's parent, passes the signals a terminal or a supervisor sends
// it on to the container's pid 1, waits for it and deletes it.
#include <optional>

#include "oci/commands/commands.h"
#include "oci/commands/signal_forwarding.h"

namespace pulsebox::oci::commands {

core::Result<int> run(StateStore& store, const CreateOptions& options, bool detach, bool keep) {
  std::optional<ForwardedSignals> forwarded;
  core::UniqueFd signal_fd;
  if (!detach) {
    forwarded.emplace();
    PB_TRY(fd, forwarded->open_fd());
    signal_fd = std::move(fd);
  }
  PB_TRY(created, create(store, options));
  if (auto started = start(store, options.id); !started.ok()) {
    (void)remove(store, options.id, true);
    return std::move(started).error();
  }
  if (detach) return 0;
  auto status =
      wait_forwarding(created.process.pidfd(), signal_fd.get(), "container " + options.id);
  if (!status) {
    (void)remove(store, options.id, true);
    return std::move(status).error();
  }
  if (!keep) PB_CHECK(remove(store, options.id, true));
  return *status;
}

}  // namespace pulsebox::oci::commands
