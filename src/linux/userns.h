// User namespace id maps, written by the parent.
//
// Two layouts (chosen in src/backends/native_backend.cc):
//   an ordinary user: one id, the sandbox's uid/gid -> the invoking uid/gid,
//     with setgroups denied (the kernel requires it);
//   root: a range of 65536 unprivileged host ids (from /etc/subuid's "root"
//     entry, else a fixed base) so that nothing inside is the host's root.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "linux/clone.h"

namespace pulsebox::linux_api {

struct IdMapping {
  std::uint32_t inside = 0;
  std::uint32_t outside = 0;
  std::uint32_t count = 1;
};

struct IdMaps {
  std::vector<IdMapping> uids;
  std::vector<IdMapping> gids;
  bool deny_setgroups = true;
  // Write through the setuid helpers newuidmap/newgidmap (shadow's uidmap
  // package), which check /etc/subuid and /etc/subgid: the only way for an
  // ordinary user to map more than its own id.
  bool use_helpers = false;
};

inline constexpr const char* kNewUidMap = "/usr/bin/newuidmap";
inline constexpr const char* kNewGidMap = "/usr/bin/newgidmap";

// Writes /proc/PID/{setgroups,uid_map,gid_map}, or runs the helpers.
core::Status write_id_maps(pid_t pid, const IdMaps& maps);

// The helper process a mapping namespace was made with, told to exit. It
// runs on this process's memory and a stack of its own, so the stack stays
// mapped until the helper is reaped: try_reap() reaps it once it has
// exited; destroying it waits for that. Known by its pidfd: a helper that
// someone else's wait reaped first is never confused with a later process
// given its pid.
class MappingHelper {
 public:
  MappingHelper() = default;
  MappingHelper(core::UniqueFd pidfd, ChildStack stack)
      : pidfd_(std::move(pidfd)), stack_(std::move(stack)) {}
  MappingHelper(MappingHelper&& other) noexcept;
  MappingHelper& operator=(MappingHelper&& other) noexcept;
  MappingHelper(const MappingHelper&) = delete;
  MappingHelper& operator=(const MappingHelper&) = delete;
  ~MappingHelper();

  // True once reaped (or when there was none); never blocks.
  bool try_reap();

 private:
  void reap();
  core::UniqueFd pidfd_;
  ChildStack stack_;
};

struct MappingNamespace {
  core::UniqueFd ns;
  MappingHelper helper;
};

// A user namespace holding only `maps`, for an idmapped mount
// (MOUNT_ATTR_IDMAP): a helper process is created in it, its maps written
// and its namespace opened. The helper is then told to exit, not waited
// for: its exit costs a wake-up of each side (~0.5 ms in this VM,
// docs/benchmarks.md), which a caller can reap later.
core::Result<MappingNamespace> create_mapping_namespace(const IdMaps& maps);

// The first range of at least `count` ids listed for `user` in a
// /etc/subuid-format file, if any.
std::optional<std::uint32_t> subordinate_id_base(const std::string& file, const std::string& user,
                                                 std::uint32_t count);

// The name of `uid` in a /etc/passwd-format file. Not getpwuid(): the CLI
// is a static executable, where glibc's NSS would load the host's shared
// modules. subuid files name local users (sssd and LDAP hand out ranges
// through libsubid instead), and newuidmap refuses a wrong guess anyway.
std::optional<std::string> user_name_in_passwd(const std::string& file, std::uint32_t uid);

// The same for the current user (by name or by number, as both are allowed).
std::optional<std::uint32_t> own_subordinate_id_base(const std::string& file, std::uint32_t count);

}  // namespace pulsebox::linux_api
