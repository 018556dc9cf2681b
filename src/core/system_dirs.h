// Which directories pulsebox refuses as a workspace or a state directory
// unless forced: the rule lives here alone, and docs/cli.md ("System
// directories") explains it. A workspace gets .agent/ and, at commit, the
// run's changes, and the sandbox sees all of it; a state directory is made
// private (chmod) and filled with staging. Neither belongs in a directory
// of the system's, nor in a home directory itself.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace pulsebox::core {

// Why `path` is a system directory, or nullopt. The path is resolved first
// (symlinks and "..", as far as it exists), so a link to /etc is /etc.
// `home` is the invoking user's home directory ($HOME; empty: unknown).
//  - with everything below: /etc, /usr, /bin, /sbin, /lib, /lib32, /lib64,
//    /libx32, /boot, /dev, /proc, /sys, /var/log, /var/spool, and /run
//    except below a user's runtime directory /run/user/UID;
//  - the directory itself only: /, /var, /var/lib, /var/cache, /tmp,
//    /var/tmp, /home, /srv, /opt, /mnt, /media, and home directories: /root,
//    /home/NAME and `home`.
std::optional<std::string> system_directory_reason(const std::filesystem::path& path,
                                                   const std::filesystem::path& home);

// The same, with `home` from $HOME.
std::optional<std::string> system_directory_reason(const std::filesystem::path& path);

// The same rule for many paths against one home, without resolving each:
// for the walk up from a canonical directory (its ancestors are canonical
// too). `home` is resolved once, here.
class SystemDirectoryCheck {
 public:
  explicit SystemDirectoryCheck(const std::filesystem::path& home);
  // `canonical`: absolute, with no symlink, "." or ".." in it, as
  // std::filesystem::canonical returns a path.
  std::optional<std::string> reason_for_canonical(const std::filesystem::path& canonical) const;

 private:
  std::filesystem::path resolved_home_;  // empty: unknown
};

}  // namespace pulsebox::core
