// Compiling a seccomp profile to a BPF program with libseccomp, in the
// parent, once: compiled programs are cached in memory and on disk, keyed by
// the profile's text, the architecture and the libseccomp version.
//
// Kill actions (SCMP_ACT_KILL, _KILL_PROCESS, _KILL_THREAD) are compiled as
// SCMP_ACT_NOTIFY: the supervisor holds the listener, learns which syscall
// was attempted, and kills the whole sandbox before the call runs. A result
// can then name the syscall, which a kernel-side kill cannot tell anyone.
// A process with no supervisor (an OCI container) asks for
// KillActions::Kernel instead: the kernel kills, and no listener is needed.
#pragma once

#include <linux/filter.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "seccomp/profile.h"

namespace pulsebox::seccomp {

struct CompiledFilter {
  std::vector<sock_filter> program;
  bool uses_listener = false;  // some action is a kill (compiled as notify)
  std::string key;
  // SECCOMP_FILTER_FLAG_* for seccomp(2) when the program is loaded (the
  // profile's OCI `flags`; they are not part of the program).
  unsigned int load_flags = 0;
};

// How the profile's kill actions are compiled: as notifications to a
// supervisor (pulsebox's own sandboxes), or as the kernel's own kills.
enum class KillActions { Notify, Kernel };

// How the syscall checks are laid out. Ranges (the default; seccomp/ranges.h)
// decides the syscalls whose decision does not depend on their arguments
// by ranges of numbers, and leaves the others to libseccomp: `default`
// goes from 439 instructions to about 160, and the kernel's time to load
// it (once per command) with them. A profile it does not suit (several
// architectures, hundreds of ranges, argument rules too many to check; any
// machine but x86_64 and aarch64) gets libseccomp's binary tree, which
// also halves the load of a long profile against the linear layout; the
// linear layout is kept for the tests that compare the three.
enum class Layout { Ranges, BinaryTree, Linear };

// Compiles without any cache.
core::Result<std::shared_ptr<const CompiledFilter>> compile(
    const Profile& profile, Layout layout = Layout::Ranges,
    KillActions kill_actions = KillActions::Notify);

// The cache key: SHA-256 of the profile text, the native architecture, the
// kernel release (minKernel conditions), the libseccomp version and this
// compiler's own version.
std::string cache_key(std::string_view profile_text);
std::string cache_key(const Profile& profile);

class FilterCache {
 public:
  // `directory` may be empty (memory only).
  explicit FilterCache(std::filesystem::path directory) : directory_(std::move(directory)) {}
  core::Result<std::shared_ptr<const CompiledFilter>> get(const Profile& profile);
  // The filter for a built-in profile's name or a file's path. A hit in
  // memory or on disk neither parses nor compiles: the JSON parse alone
  // showed in every `pulsebox run` (docs/benchmarks.md).
  core::Result<std::shared_ptr<const CompiledFilter>> get(const std::string& name_or_path);

  struct Stats {
    int compiled = 0;
    int from_disk = 0;
    int from_memory = 0;
  };
  Stats stats() const;

 private:
  std::shared_ptr<const CompiledFilter> find_locked(const std::string& key);
  void store_locked(const std::string& key, std::shared_ptr<const CompiledFilter> compiled);

  std::filesystem::path directory_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const CompiledFilter>> memory_;
  Stats stats_;
};

// The name of syscall `nr` on audit architecture `arch`, or "syscall NR".
std::string syscall_name(std::uint32_t arch, int nr);

}  // namespace pulsebox::seccomp
