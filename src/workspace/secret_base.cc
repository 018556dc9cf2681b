#include "workspace/secret_base.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>

#include "core/sha256.h"
#include "core/unique_fd.h"
#include "pulsebox/secrets.h"
#include "workspace/safe_open.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

CheckedBase check_base(int root_fd, const std::string& path, const SecretScrubber& secrets,
                       std::uint64_t max_bytes) {
  using Kind = CheckedBase::Kind;
  CheckedBase checked;
  std::string name;
  auto parent = open_parent(root_fd, path, &name);
  if (!parent) return checked;
  struct stat st {};
  if (::fstatat(parent->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return checked;
  if (S_ISDIR(st.st_mode)) {
    checked.kind = Kind::kDirectory;
    return checked;
  }
  std::string content;
  if (S_ISLNK(st.st_mode)) {
    content.resize(PATH_MAX);
    const ssize_t n = ::readlinkat(parent->get(), name.c_str(), content.data(), content.size());
    if (n < 0) return checked;
    content.resize(static_cast<std::size_t>(n));
  } else if (S_ISREG(st.st_mode)) {
    checked.kind = Kind::kUnchecked;
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return checked;
    core::UniqueFd fd(
        ::openat(parent->get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return checked;
    auto bytes = read_regular_file(fd.get(), max_bytes, path);
    if (!bytes) return checked;
    content = std::move(bytes).value();
    checked.bytes_read = content.size();
  } else {
    return checked;
  }
  checked.sha256 = core::sha256_hex(content);
  if (secrets.contains_secret(content)) {
    checked.kind = Kind::kHolds;
    checked.redacted = secrets.redact(content);
  } else {
    checked.kind = Kind::kClean;
  }
  return checked;
}

}  // namespace pulsebox::workspace
