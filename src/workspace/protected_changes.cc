#include "workspace/protected_changes.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include "core/text.h"
#include "workspace/safe_open.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

bool equal_ignoring_ascii_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && core::ascii_lower(a) == core::ascii_lower(b);
}

// What a directory holds, now (the workspace) or after the commit (the
// transaction's entries).
class TreeView {
 public:
  TreeView(int root_fd, const Draft& draft) : root_fd_(root_fd), draft_(draft) {}

  bool holds(std::string_view dir, std::string_view name) const {
    return staged(dir, name) || present(dir, name);
  }

 private:
  // An entry staged directly in `dir` under `name`, ignoring ASCII case (the
  // workspace may be on a case-insensitive file system).
  bool staged(std::string_view dir, std::string_view name) const {
    if (name.empty()) return false;
    const std::string prefix = dir.empty() ? std::string() : std::string(dir) + "/";
    const char first = name.front();
    const char lower =
        (first >= 'A' && first <= 'Z') ? static_cast<char>(first - 'A' + 'a') : first;
    const char upper =
        (first >= 'a' && first <= 'z') ? static_cast<char>(first - 'a' + 'A') : first;
    for (const char initial : {lower, upper}) {
      const std::string start = prefix + initial;
      auto it = draft_.entries.lower_bound(start);
      while (it != draft_.entries.end() && it->first.starts_with(start)) {
        const std::string_view rest = std::string_view(it->first).substr(prefix.size());
        const std::size_t slash = rest.find('/');
        const std::string_view child = rest.substr(0, slash);
        if (equal_ignoring_ascii_case(child, name)) return true;
        // Skip what is staged beneath `child` ('0' sorts right after '/').
        it = slash == std::string_view::npos
                 ? std::next(it)
                 : draft_.entries.lower_bound(prefix + std::string(child) + '0');
      }
      if (lower == upper) break;
    }
    return false;
  }

  bool present(std::string_view dir, std::string_view name) const {
    int dirfd = root_fd_;
    UniqueFd opened;
    if (!dir.empty()) {
      auto fd = open_beneath(root_fd_, std::string(dir), O_PATH | O_DIRECTORY);
      if (!fd) return false;
      opened = std::move(fd).value();
      dirfd = opened.get();
    }
    struct stat st {};
    return ::fstatat(dirfd, std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  }

  int root_fd_;
  const Draft& draft_;
};

std::string join(const std::vector<std::string>& names, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t k = from; k < to; ++k) {
    if (!out.empty()) out += '/';
    out += names[k];
  }
  return out;
}

core::Result<std::string> path_of_fd(int fd) {
  char target[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
  if (n < 0) return Error::from_errno("workspace", "readlink " + link);
  return std::string(target, static_cast<std::size_t>(n));
}

// Where `path` really lies beneath the root when an existing directory on the
// way is a symlink (commit resolves them beneath the root, so a write to
// "hooks/x" with "hooks -> .git/hooks" lands in .git/hooks); nullopt when
// none is.
core::Result<std::optional<std::string>> resolved_location(int root_fd, const std::string& path) {
  // Without openat2 commit refuses every symlink on the way.
  if (!openat2_supported()) return std::optional<std::string>();
  const std::vector<std::string> names = path_names(path);
  std::size_t parents = names.size() > 0 ? names.size() - 1 : 0;
  // The common case: the deepest existing directory is reached without a symlink.
  bool through_symlink = false;
  for (; parents > 0; --parents) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const std::string prefix = join(names, 0, parents);
    long fd;
    do {
      fd = ::syscall(SYS_openat2, root_fd, prefix.c_str(), &how, sizeof how);
    } while (fd < 0 && (errno == EAGAIN || errno == EINTR));
    if (fd >= 0) {
      ::close(static_cast<int>(fd));
      return std::optional<std::string>();
    }
    if (errno == ELOOP || errno == EXDEV) {
      through_symlink = true;
      break;
    }
    if (errno != ENOENT && errno != ENOTDIR) return std::optional<std::string>();
  }
  if (!through_symlink) return std::optional<std::string>();
  for (; parents > 0; --parents) {
    auto dir = open_beneath(root_fd, join(names, 0, parents), O_PATH | O_DIRECTORY);
    if (!dir) {
      const int err = dir.error().error_number();
      if (err == ENOENT || err == ENOTDIR) continue;
      // Outside the root: commit refuses to write there anyway.
      return std::optional<std::string>();
    }
    PB_TRY(root_path, path_of_fd(root_fd));
    PB_TRY(dir_path, path_of_fd(dir->get()));
    std::string real;
    if (dir_path != root_path) {
      if (!dir_path.starts_with(root_path + "/")) {
        return Error(ErrorKind::kSecurity, "workspace",
                     "cannot tell where " + path + " lies in the workspace (" + dir_path +
                         " is not beneath " + root_path + ")");
      }
      real = dir_path.substr(root_path.size() + 1);
    }
    const std::string rest = join(names, parents, names.size());
    return std::optional<std::string>(real.empty() ? rest : real + "/" + rest);
  }
  return std::optional<std::string>();
}

// The first protected path beneath directory `dirfd` (at `prefix`), which a
// deletion of the directory would remove.
core::Result<std::optional<ProtectedChange>> find_beneath(int dirfd, const std::string& prefix,
                                                          const HoldsEntry& holds, int depth) {
  if (depth > kMaxTreeDepth) {
    return Error(ErrorKind::kResource, "workspace", prefix + ": directories nested too deeply");
  }
  for (const std::string& name : list_directory(dirfd)) {
    const std::string child = prefix + "/" + name;
    if (auto match = match_protected_path(child, NodeType::Absent, holds)) {
      return std::optional<ProtectedChange>(
          ProtectedChange{ProtectedChange::Via::kRemoves, child, std::move(*match)});
    }
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
      continue;
    UniqueFd sub(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub) return Error::from_errno("workspace", "open directory " + child);
    PB_TRY(found, find_beneath(sub.get(), child, holds, depth + 1));
    if (found) return found;
  }
  return std::optional<ProtectedChange>();
}

}  // namespace

core::Result<std::optional<ProtectedChange>> find_protected_change(int root_fd, const Draft& draft,
                                                                   const Entry& entry) {
  for (std::size_t slash = entry.path.find('/'); slash != std::string::npos;
       slash = entry.path.find('/', slash + 1)) {
    const std::string ancestor = entry.path.substr(0, slash);
    auto it = draft.entries.find(ancestor);
    if (it != draft.entries.end() && it->second.op == StagedOp::Symlink) {
      return Error(ErrorKind::kSecurity, "workspace",
                   "refusing " + entry.path + ": " + ancestor +
                       " is staged as a symlink in the same transaction, so the change would be "
                       "written wherever it points; stage it at the symlink's target instead");
    }
  }
  const TreeView tree(root_fd, draft);
  const HoldsEntry holds = [&tree](std::string_view dir, std::string_view name) {
    return tree.holds(dir, name);
  };
  const NodeType type = type_after(entry);
  using Found = std::optional<ProtectedChange>;
  if (auto match = match_protected_path(entry.path, type, holds))
    return Found(ProtectedChange{ProtectedChange::Via::kItself, entry.path, std::move(*match)});
  // Beneath a symlink the transaction replaces by a directory, the path will
  // not resolve through that symlink.
  std::optional<std::string> real;
  if (!beneath_new_directory(draft, entry.path)) {
    PB_TRY(resolved, resolved_location(root_fd, entry.path));
    real = std::move(resolved);
  }
  if (real) {
    if (auto match = match_protected_path(*real, type, holds))
      return Found(ProtectedChange{ProtectedChange::Via::kResolves, *real, std::move(*match)});
  }
  if (entry.snapshot.type == NodeType::Directory && type != NodeType::Directory) {
    auto dir = open_beneath(root_fd, entry.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (dir) return find_beneath(dir->get(), real.value_or(entry.path), holds, 0);
  }
  return Found();
}

bool rule_names_change(std::string_view rule_pattern, const Entry& entry,
                       const ProtectedChange& change) {
  const auto pattern = normalize_policy_target(rule_pattern);
  if (!pattern) return false;
  std::vector<std::string> names;
  auto add = [&names](std::string_view name) {
    if (auto normalized = normalize_policy_target(name)) names.push_back(std::move(*normalized));
  };
  for (const std::string& name : change.match.names)
    add(name);
  // The protected name is not in the entry's path: naming the entry will do.
  if (change.via != ProtectedChange::Via::kItself)
    add(std::string_view(entry.path).substr(entry.path.rfind('/') + 1));
  for (const std::string& part : path_names(*pattern)) {
    if (part.find_first_of("*?[") != std::string::npos) continue;
    for (const std::string& name : names) {
      if (part == name) return true;
    }
  }
  return false;
}

std::string describe_protected_refusal(std::string_view action, const Entry& entry,
                                       const ProtectedChange& change) {
  std::string how;
  switch (change.via) {
    case ProtectedChange::Via::kItself:
      break;
    case ProtectedChange::Via::kResolves:
      how = "it resolves to " + core::quote_name(change.path) + ", ";
      break;
    case ProtectedChange::Via::kRemoves:
      how = "it would remove " + core::quote_name(change.path) + ", ";
      break;
  }
  // Names are the sandbox's: quoted for a terminal (core::quote_name).
  const std::string name = core::quote_name(entry.path);
  return "refusing to " + std::string(action) + " " + name + ": " + how + change.match.why +
         "; to allow it, add a policy rule naming it, e.g. {\"action\": \"" + std::string(action) +
         "\", \"target\": \"" + entry.path + "\", \"decision\": \"allow\"}";
}

}  // namespace pulsebox::workspace
