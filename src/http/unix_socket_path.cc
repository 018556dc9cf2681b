#include "http/unix_socket_path.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace pulsebox::http {
namespace {

using core::Error;
using core::ErrorKind;

bool someone_listens(const std::filesystem::path& path) {
  core::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  return probe &&
         ::connect(probe.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
}

}  // namespace

core::Status prepare_unix_socket_path(const std::filesystem::path& path) {
  if (path.string().size() >= sizeof(sockaddr_un::sun_path)) {
    return Error(ErrorKind::kInvalidInput, "--listen",
                 path.string() + ": a unix socket path must be shorter than " +
                     std::to_string(sizeof(sockaddr_un::sun_path)) + " bytes");
  }
  const std::filesystem::path directory = path.parent_path();
  struct stat st {};
  if (::lstat(directory.c_str(), &st) != 0) {
    if (errno != ENOENT) return Error::from_errno("--listen", directory.string());
    std::error_code ec;
    std::filesystem::create_directories(directory.parent_path(), ec);
    if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST)
      return Error::from_errno("--listen", "cannot create " + directory.string());
  } else if (!S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kInvalidInput, "--listen", directory.string() + " is not a directory");
  }
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return core::Status();
    return Error::from_errno("--listen", path.string());
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Error(ErrorKind::kInvalidInput, "--listen",
                 path.string() +
                     " exists and is not a socket: not replaced (remove it or choose "
                     "another path)");
  }
  if (someone_listens(path)) {
    return Error(ErrorKind::kUnavailable, "--listen",
                 "a server already listens on " + path.string());
  }
  if (::unlink(path.c_str()) != 0)
    return Error::from_errno("--listen", "cannot remove the stale socket " + path.string());
  return core::Status();
}

}  // namespace pulsebox::http
