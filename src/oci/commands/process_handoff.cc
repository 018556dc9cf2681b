#include "oci/commands/process_handoff.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "oci/invalid_input.h"

namespace pulsebox::oci::commands {

core::Result<core::UniqueFd> above_preserved(core::UniqueFd fd, int preserved) {
  if (!fd) return core::Error::from_errno("oci", "opening a descriptor for the container");
  if (fd.get() >= 3 + preserved) return fd;
  const int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3 + preserved);
  if (moved < 0)
    return core::Error::from_errno("oci", "moving a descriptor above the preserved ones");
  return core::UniqueFd(moved);
}

core::Result<core::UniqueFd> connect_console(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path)
    return invalid("--console-socket " + path + ": the path is too long for a socket");
  path.copy(address.sun_path, path.size());
  core::UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!socket ||
      ::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return core::Error::from_errno("oci", "--console-socket " + path + ": connecting");
  return socket;
}

}  // namespace pulsebox::oci::commands
