#include "workspace/secret_base.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "core/sha256.h"
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
  if (!S_ISLNK(st.st_mode) && !S_ISREG(st.st_mode)) return checked;
  if (S_ISREG(st.st_mode)) {
    checked.kind = Kind::kUnchecked;
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) return checked;
  }
  auto read = read_file_or_link(parent->get(), name, S_ISLNK(st.st_mode), max_bytes, path);
  if (!read) return checked;  // a link that cannot be read: kNone, as a file: kUnchecked
  std::string content = std::move(read).value();
  if (S_ISREG(st.st_mode)) checked.bytes_read = content.size();
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
