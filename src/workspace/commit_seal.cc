#include "workspace/commit_seal.h"

#include <fcntl.h>
#include <unistd.h>

#include <sstream>

#include "audit/key.h"
#include "core/unique_fd.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;

namespace {

constexpr std::string_view kMagic = "pulsebox-commit 1";

// SHA-256 of the log, read in chunks (a log of 100,000 steps is ~30 MB).
core::Result<std::string> log_digest(const std::filesystem::path& wal) {
  core::UniqueFd fd(::open(wal.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error::from_errno("workspace", "open " + wal.string());
  return sha256_of_fd(fd.get());
}

std::string mac_input(const std::string& id, const std::filesystem::path& root) {
  return std::string(kMagic) + '\0' + id + '\0' + root.string() + '\0';
}

Error unsealed(const std::string& why) {
  return Error(ErrorKind::kSecurity, "workspace", why);
}

}  // namespace

core::Result<std::string> seal_commit_point(const AuditKeyLocation& location, const std::string& id,
                                            const std::filesystem::path& root,
                                            const std::filesystem::path& wal) {
  const std::string unkeyed = std::string(kMagic) + " unkeyed\n";
  if (location.file.empty()) return unkeyed;
  // A key that cannot be made fails no commit (the audit log only warns
  // then too); its READY just never verifies.
  auto key = audit::Key::load(location.file, /*create=*/true);
  if (!key) return unkeyed;
  PB_TRY(digest, log_digest(wal));
  return std::string(kMagic) + " " + (*key)->id() + " " + (*key)->mac(mac_input(id, root), digest) +
         "\n";
}

core::Status check_commit_seal(const AuditKeyLocation& location, const std::string& id,
                               const std::filesystem::path& root, const std::filesystem::path& wal,
                               const std::string& ready) {
  std::istringstream line(ready);
  std::string name, version, key_id, mac;
  line >> name >> version >> key_id >> mac;
  if (name + " " + version != kMagic || key_id.empty()) {
    return unsealed(
        "its commit point (READY) carries no seal of this user's pulsebox: planted, or written "
        "by a pulsebox before commit points were sealed");
  }
  if (key_id == "unkeyed") {
    return unsealed(
        "its commit point was sealed without a key (there was no audit key where it was "
        "committed), so nothing shows that this user's pulsebox decided it");
  }
  if (location.file.empty()) {
    return unsealed("its commit point was sealed with audit key " + key_id +
                    ", and this process has no key: " + location.unavailable);
  }
  auto key = audit::Key::load(location.file, /*create=*/false);
  if (!key) {
    return unsealed("its commit point was sealed with audit key " + key_id +
                    ", which cannot be read here: " + key.error().to_string());
  }
  if ((*key)->id() != key_id) {
    return unsealed("its commit point was sealed with audit key " + key_id + ", not with " +
                    (*key)->id() + " (" + location.file.string() + ")");
  }
  PB_TRY(digest, log_digest(wal));
  if (!(*key)->matches(mac_input(id, root), digest, mac)) {
    return unsealed(
        "its seal does not match this workspace and its write-ahead log (sealed for another "
        "workspace, or the log changed after it was sealed)");
  }
  return core::ok_status();
}

}  // namespace pulsebox::workspace
