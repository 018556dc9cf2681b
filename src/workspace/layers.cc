#include "workspace/layers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <memory>
#include <set>
#include <vector>

#include "core/fs.h"
#include "core/unique_fd.h"
#include "workspace/owner_opened.h"
#include "workspace/safe_open.h"
#include "workspace/store_files.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

constexpr char kOpaque[] = "user.overlay.opaque";

bool is_whiteout(const struct stat& st) {
  return S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0;
}

bool is_opaque_fd(int dirfd) {
  // The overlay is mounted with userxattr: only user.overlay.* counts.
  char value[8] = {};
  return ::fgetxattr(dirfd, kOpaque, value, sizeof value) == 1 && value[0] == 'y';
}

// A layer's own directory: never through a symlink in its place.
core::Result<UniqueFd> open_layer(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error::from_errno("session", "open the layer " + path.string());
  return fd;
}

UniqueFd open_dir_at(int dirfd, const std::string& name) {
  return UniqueFd(::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// An ordinary user cannot rename into or out of a directory without write
// permission on it, even its own (a command may make one read-only). Adds
// the owner's permissions for the merge and puts the mode back afterwards.
class WritableWhileMerging {
 public:
  explicit WritableWhileMerging(int dirfd) : fd_(dirfd) {
    struct stat st {};
    if (::geteuid() == 0 || ::fstat(fd_, &st) != 0 || st.st_uid != ::geteuid()) return;
    if ((st.st_mode & S_IRWXU) == S_IRWXU) return;
    mode_ = st.st_mode & 07777;
    if (::fchmod(fd_, mode_ | S_IRWXU) != 0) mode_ = 0;
  }
  ~WritableWhileMerging() {
    if (mode_ != 0) ::fchmod(fd_, mode_);
  }
  WritableWhileMerging(const WritableWhileMerging&) = delete;
  WritableWhileMerging& operator=(const WritableWhileMerging&) = delete;

 private:
  int fd_;
  mode_t mode_ = 0;
};

// The merged directory takes the upper one's mode, owner and times (`st`,
// as it was looked up: not a mode added for the merge): the upper copy is
// what the sandbox last saw.
void copy_directory_metadata(const struct stat& st, int to) {
  if (::geteuid() == 0) ::fchown(to, st.st_uid, st.st_gid);
  ::fchmod(to, st.st_mode & 07777);
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ::futimens(to, times);
}

// A layer's entry and everything beneath it (a layer is never deeper than
// kMaxTreeDepth: a deeper one is refused before it is one).
core::Status remove_tree_fd(int dirfd, const std::string& name) {
  return remove_tree_at(dirfd, name, TreeRemoval{.stage = "session", .max_depth = kMaxTreeDepth});
}

core::Status merge_directory(int upper, int lower, const std::string& prefix, int depth) {
  if (depth > kMaxTreeDepth) {
    return Error(ErrorKind::kResource, "session", prefix + ": directories nested too deeply");
  }
  WritableWhileMerging upper_writable(upper);
  WritableWhileMerging lower_writable(lower);
  for (const std::string& name : list_directory(upper)) {
    const std::string path = prefix + name;
    struct stat up {};
    if (::fstatat(upper, name.c_str(), &up, AT_SYMLINK_NOFOLLOW) != 0) {
      return Error::from_errno("session", "stat " + path);
    }
    struct stat below {};
    const bool lower_exists = ::fstatat(lower, name.c_str(), &below, AT_SYMLINK_NOFOLLOW) == 0;
    // What the upper layer has at `name` replaces what the lower one has.
    const auto move_down = [&]() -> core::Status {
      if (lower_exists) PB_CHECK(remove_tree_fd(lower, name));
      if (::renameat(upper, name.c_str(), lower, name.c_str()) != 0) {
        return Error::from_errno("session", "moving " + path + " into the layer below");
      }
      return core::ok_status();
    };
    if (S_ISDIR(up.st_mode)) {
      // A run's `chmod 000` keeps an ordinary user out of its own directory
      // too: opened with the owner's permission added for the merge.
      const OwnerOpened up_dir(upper, name, O_RDONLY | O_DIRECTORY, up);
      if (!up_dir) return Error::from_errno("session", "open " + path);
      const bool opaque = is_opaque_fd(up_dir.get());
      if (!opaque && lower_exists && S_ISDIR(below.st_mode)) {
        // Both layers have the directory and neither hides the other: merge
        // what they hold.
        OwnerOpened low_dir(lower, name, O_RDONLY | O_DIRECTORY, below);
        if (!low_dir) return Error::from_errno("session", "open " + path);
        PB_CHECK(merge_directory(up_dir.get(), low_dir.get(), path + "/", depth + 1));
        copy_directory_metadata(up, low_dir.get());
        low_dir.keep_mode();  // the upper one's, just given
        if (::unlinkat(upper, name.c_str(), AT_REMOVEDIR) != 0) {
          return Error::from_errno("session", "remove the merged directory " + path);
        }
        continue;
      }
      // Marked opaque or moved to another parent (which rewrites its
      // ".."), a directory is written: an ordinary user may do either only
      // to one it may write (`chmod 555 d`).
      const WritableWhileMerging writable(up_dir.get());
      if (!opaque && lower_exists) {
        // The lower layer hid the path beneath (a whiteout or a file): the
        // directory replacing it must keep hiding it once it is the lower.
        if (::fsetxattr(up_dir.get(), kOpaque, "y", 1, 0) != 0) {
          return Error::from_errno("session", "marking " + path + " opaque");
        }
      }
      PB_CHECK(move_down());
      continue;
    }
    PB_CHECK(move_down());
  }
  return core::ok_status();
}

void copy_metadata(int fd, const struct stat& st, bool is_directory) {
  if (::geteuid() == 0) ::fchown(fd, st.st_uid, st.st_gid);
  ::fchmod(fd, st.st_mode & 07777);
  if (is_directory && is_opaque_fd(fd)) return;  // set by the caller
}

// Outside copy_tree: its buffer must not sit in every frame of the recursion.
core::Status copy_contents(int source, int target, const std::string& path) {
  for (;;) {
    const ssize_t n = ::copy_file_range(source, nullptr, target, nullptr, 1 << 30, 0);
    if (n == 0) return core::ok_status();
    if (n > 0) continue;
    if (errno == EINTR) continue;
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
      return Error::from_errno("session", "copy " + path);
    }
    std::vector<char> buffer(1 << 16);
    ssize_t got = 0;
    while ((got = ::read(source, buffer.data(), buffer.size())) > 0) {
      PB_CHECK(core::write_all(target, {buffer.data(), static_cast<std::size_t>(got)}, path));
    }
    if (got < 0) return Error::from_errno("session", "read " + path);
    return core::ok_status();
  }
}

core::Status copy_tree(int from_dir, int to_dir, const std::string& prefix, int depth) {
  if (depth > kMaxTreeDepth) {
    return Error(ErrorKind::kResource, "session", prefix + ": directories nested too deeply");
  }
  for (const std::string& name : list_directory(from_dir)) {
    const std::string path = prefix + name;
    struct stat st {};
    if (::fstatat(from_dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return Error::from_errno("session", "stat " + path);
    }
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    if (S_ISDIR(st.st_mode)) {
      if (::mkdirat(to_dir, name.c_str(), 0700) != 0) {
        return Error::from_errno("session", "mkdir " + path);
      }
      const OwnerOpened source(from_dir, name, O_RDONLY | O_DIRECTORY, st);
      UniqueFd target = open_dir_at(to_dir, name);
      if (!source || !target) return Error::from_errno("session", "open " + path);
      PB_CHECK(copy_tree(source.get(), target.get(), path + "/", depth + 1));
      if (is_opaque_fd(source.get()) && ::fsetxattr(target.get(), kOpaque, "y", 1, 0) != 0) {
        return Error::from_errno("session", "marking " + path + " opaque");
      }
      copy_metadata(target.get(), st, true);
      ::futimens(target.get(), times);
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      const OwnerOpened source(from_dir, name, O_RDONLY, st);
      UniqueFd target(::openat(to_dir, name.c_str(),
                               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!source || !target) return Error::from_errno("session", "copy " + path);
      PB_CHECK(copy_contents(source.get(), target.get(), path));
      copy_metadata(target.get(), st, false);
      ::futimens(target.get(), times);
      continue;
    }
    if (S_ISLNK(st.st_mode)) {
      std::string link(PATH_MAX, '\0');
      const ssize_t n = ::readlinkat(from_dir, name.c_str(), link.data(), link.size());
      if (n < 0) return Error::from_errno("session", "readlink " + path);
      link.resize(static_cast<std::size_t>(n));
      if (::symlinkat(link.c_str(), to_dir, name.c_str()) != 0) {
        return Error::from_errno("session", "symlink " + path);
      }
    } else if (::mknodat(to_dir, name.c_str(), st.st_mode & (S_IFMT | 0777), st.st_rdev) != 0) {
      // Whiteouts and FIFOs can be made by anyone; a device only with
      // CAP_MKNOD, and it is never committed anyway: say which.
      return Error::from_errno("session", "recreating " + path);
    }
    if (::geteuid() == 0)
      ::fchownat(to_dir, name.c_str(), st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW);
    ::utimensat(to_dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
  }
  return core::ok_status();
}

struct LayerDescriber {
  const std::function<KindBelow(const std::string&)>& kind_below;
  const std::function<std::vector<std::string>(const std::string&)>& names_below;
  std::size_t max_entries;
  std::vector<Change> changes;

  bool full() const { return changes.size() >= max_entries; }
  void add(std::string path, ChangeKind kind) {
    if (!full()) changes.push_back({std::move(path), kind});
  }

  // A directory that hides what the view below held in it (`rm -r d;
  // mkdir d`: opaque, or beneath one): each name it does not hold again
  // is deleted.
  void add_hidden(int dirfd, const std::string& prefix) {
    const std::string dir = prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1);
    for (const std::string& name : names_below(dir)) {
      if (full()) return;
      if (prefix.empty() && name == ".agent") continue;
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT)
        add(prefix + name, ChangeKind::Deleted);
    }
  }

  // `hidden`: the view below does not show through here (an opaque
  // directory here or above).
  void walk(int dirfd, const std::string& prefix, int depth, bool hidden) {
    if (depth > kMaxTreeDepth) return;
    for (const std::string& name : list_directory(dirfd)) {
      if (full()) return;
      if (prefix.empty() && name == ".agent") continue;  // never imported
      const std::string path = prefix + name;
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (is_whiteout(st)) {
        add(path, ChangeKind::Deleted);
      } else if (S_ISLNK(st.st_mode)) {
        add(path, ChangeKind::Symlink);
      } else if (S_ISDIR(st.st_mode)) {
        const KindBelow below = kind_below(path);
        if (below == KindBelow::kAbsent) add(path, ChangeKind::Added);
        if (below == KindBelow::kOther) add(path, ChangeKind::Modified);  // a file was there
        const OwnerOpened child(dirfd, name, O_RDONLY | O_DIRECTORY, st);
        if (!child) continue;
        const bool hides = hidden || is_opaque_fd(child.get());
        if (hides && below == KindBelow::kDirectory) add_hidden(child.get(), path + "/");
        walk(child.get(), path + "/", depth + 1, hides);
      } else {
        add(path,
            kind_below(path) != KindBelow::kAbsent ? ChangeKind::Modified : ChangeKind::Added);
      }
    }
  }
};

// What one layer says of `path`: present, hidden (a whiteout, or an ancestor
// that is opaque, a whiteout or not a directory), or nothing (look below).
enum class LayerAnswer { Present, Hidden, Nothing };

struct LayerLookup {
  LayerAnswer answer = LayerAnswer::Nothing;
  bool directory = false;  // present as a directory
};

// `of_a_run`: `layer` is a run's (its directories are opened as their
// owner where the run shut them: OwnerOpened), not the workspace, whose
// modes pulsebox never changes, not even for an instant. `in_directory`,
// when given, is handed `path` opened when it is a directory here, and
// whether it hides what lies below it (it or an ancestor is opaque).
LayerLookup ask_layer(const std::filesystem::path& layer, const std::string& path, bool of_a_run,
                      const std::function<void(int dir, bool hides_below)>& in_directory = {}) {
  UniqueFd root(::open(layer.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return {};
  // The directories on the way; the modes of those opened as their owner
  // come back once answered.
  std::vector<std::unique_ptr<OwnerOpened>> on_the_way;
  std::vector<UniqueFd> opened;
  const auto open_at = [&](int dir, const std::string& name, const struct stat& st) {
    if (of_a_run) {
      on_the_way.push_back(std::make_unique<OwnerOpened>(dir, name, O_RDONLY | O_DIRECTORY, st));
      return on_the_way.back()->get();
    }
    opened.push_back(open_dir_at(dir, name));
    return opened.back().get();
  };
  int dir = root.get();
  bool beneath_opaque = false;  // nothing beneath shows through: answered here
  if (path.empty()) {
    if (in_directory) in_directory(dir, is_opaque_fd(dir));
    return {LayerAnswer::Present, true};
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = path.find('/', start);
    const std::string name = path.substr(start, slash == std::string::npos ? slash : slash - start);
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return {beneath_opaque ? LayerAnswer::Hidden : LayerAnswer::Nothing};
    if (is_whiteout(st)) return {LayerAnswer::Hidden};
    if (slash == std::string::npos) {
      if (S_ISDIR(st.st_mode) && in_directory) {
        const int found = open_at(dir, name, st);
        if (found >= 0) in_directory(found, beneath_opaque || is_opaque_fd(found));
      }
      return {LayerAnswer::Present, S_ISDIR(st.st_mode)};
    }
    if (!S_ISDIR(st.st_mode)) return {LayerAnswer::Hidden};  // a file where a directory was
    dir = open_at(dir, name, st);
    if (dir < 0) return {beneath_opaque ? LayerAnswer::Hidden : LayerAnswer::Nothing};
    beneath_opaque = beneath_opaque || is_opaque_fd(dir);
    start = slash + 1;
  }
}

// The view of `layers` (top first, runs') over `base` (the workspace),
// asked of `path` layer by layer until one answers.
LayerLookup ask_view(const std::vector<std::filesystem::path>& layers,
                     const std::filesystem::path& base, const std::string& path) {
  for (const auto& layer : layers) {
    const LayerLookup found = ask_layer(layer, path, /*of_a_run=*/true);
    if (found.answer != LayerAnswer::Nothing) return found;
  }
  return ask_layer(base, path, /*of_a_run=*/false);
}

}  // namespace

core::Status merge_layer(const std::filesystem::path& upper, const std::filesystem::path& lower) {
  PB_TRY(upper_fd, open_layer(upper));
  PB_TRY(lower_fd, open_layer(lower));
  if (is_opaque_fd(upper_fd.get())) {
    // The whole lower layer is hidden: what it holds goes.
    for (const std::string& name : list_directory(lower_fd.get()))
      PB_CHECK(remove_tree_fd(lower_fd.get(), name));
    if (::fsetxattr(lower_fd.get(), kOpaque, "y", 1, 0) != 0) {
      return Error::from_errno("session", "marking " + lower.string() + " opaque");
    }
    // The lower one hides what it must now: a merge started again must not
    // empty it a second time (it holds what was moved down since).
    if (::fremovexattr(upper_fd.get(), kOpaque) != 0 && errno != ENODATA) {
      return Error::from_errno("session", "clearing " + upper.string() + "'s opaque mark");
    }
  }
  struct stat top {};
  if (::fstat(upper_fd.get(), &top) != 0)
    return Error::from_errno("session", "stat " + upper.string());
  PB_CHECK(merge_directory(upper_fd.get(), lower_fd.get(), "", 0));
  copy_directory_metadata(top, lower_fd.get());
  return core::ok_status();
}

std::vector<Change> describe_layer(
    const std::filesystem::path& layer,
    const std::function<KindBelow(const std::string&)>& kind_below,
    const std::function<std::vector<std::string>(const std::string&)>& names_below,
    std::size_t max_entries) {
  LayerDescriber describer{kind_below, names_below, max_entries, {}};
  UniqueFd dir(::open(layer.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return {};
  const bool hidden = is_opaque_fd(dir.get());
  if (hidden) describer.add_hidden(dir.get(), "");
  describer.walk(dir.get(), "", 0, hidden);
  return std::move(describer.changes);
}

std::vector<std::string> names_in_view(const std::vector<std::filesystem::path>& layers,
                                       const std::filesystem::path& base, const std::string& dir) {
  // Layer by layer, top first: a whiteout hides the name below it; a
  // layer where the directory hides what lies below (opaque) is the last.
  std::set<std::string> names;
  std::set<std::string> whited_out;
  bool last = false;
  const auto take = [&](int fd, bool hides_below) {
    for (const std::string& name : list_directory(fd)) {
      struct stat st {};
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (is_whiteout(st)) {
        whited_out.insert(name);
      } else if (whited_out.count(name) == 0) {
        names.insert(name);
      }
    }
    last = hides_below;
  };
  for (std::size_t i = 0; i <= layers.size() && !last; ++i) {
    const bool of_a_run = i < layers.size();
    // A directory here that could not be opened ends the search too: had it
    // been opaque, the names below would be listed as deleted wrongly.
    last = true;
    const LayerLookup found = ask_layer(of_a_run ? layers[i] : base, dir, of_a_run, take);
    if (found.answer == LayerAnswer::Nothing) last = false;
    if (found.answer == LayerAnswer::Hidden ||
        (found.answer == LayerAnswer::Present && !found.directory)) {
      break;
    }
  }
  return {names.begin(), names.end()};
}

KindBelow kind_in_view(const std::vector<std::filesystem::path>& layers,
                       const std::filesystem::path& base, const std::string& path) {
  const LayerLookup found = ask_view(layers, base, path);
  if (found.answer != LayerAnswer::Present) return KindBelow::kAbsent;
  return found.directory ? KindBelow::kDirectory : KindBelow::kOther;
}

bool exists_in_view(const std::vector<std::filesystem::path>& layers,
                    const std::filesystem::path& base, const std::string& path) {
  return ask_view(layers, base, path).answer == LayerAnswer::Present;
}

namespace {

bool deeper_than(int dirfd, int remaining) {
  if (remaining < 0) return true;
  for (const std::string& name : list_directory(dirfd)) {
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
      continue;
    }
    const OwnerOpened child(dirfd, name, O_RDONLY | O_DIRECTORY, st);
    if (child && deeper_than(child.get(), remaining - 1)) return true;
  }
  return false;
}

}  // namespace

bool layer_deeper_than(const std::filesystem::path& layer, int limit) {
  auto fd = open_layer(layer);
  return fd && deeper_than(fd->get(), limit);
}

core::Status move_layer(const std::filesystem::path& from, const std::filesystem::path& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return core::ok_status();
  if (errno != EXDEV)
    return Error::from_errno("session", "moving " + from.string() + " to " + to.string());
  PB_TRY(source, open_layer(from));
  if (::mkdir(to.c_str(), 0700) != 0) return Error::from_errno("session", "mkdir " + to.string());
  PB_TRY(target, open_layer(to));
  auto copied = copy_tree(source.get(), target.get(), "", 0);
  if (!copied) {
    (void)remove_layer_tree(to);
    return copied;
  }
  struct stat st {};
  if (::fstat(source.get(), &st) == 0) {
    if (is_opaque_fd(source.get())) ::fsetxattr(target.get(), kOpaque, "y", 1, 0);
    copy_metadata(target.get(), st, true);
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    ::futimens(target.get(), times);
  }
  return core::ok_status();
}

namespace {

core::Status unshare_in(int dir, const std::string& prefix, int depth, int temp_dir,
                        std::size_t& copied) {
  if (depth > kMaxTreeDepth) return Error(ErrorKind::kResource, "session", "nested too deeply");
  struct stat dir_stat {};
  if (::fstat(dir, &dir_stat) != 0) return Error::from_errno("session", "stat " + prefix);
  WritableWhileMerging writable(dir);
  bool replaced = false;
  for (const std::string& name : list_directory(dir)) {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return Error::from_errno("session", "stat " + prefix + name);
    if (S_ISDIR(st.st_mode)) {
      const OwnerOpened child(dir, name, O_RDONLY | O_DIRECTORY, st);
      if (!child) return Error::from_errno("session", "open " + prefix + name);
      PB_CHECK(unshare_in(child.get(), prefix + name + "/", depth + 1, temp_dir, copied));
      continue;
    }
    if (!S_ISREG(st.st_mode) || st.st_nlink < 2) continue;
    // Never opened as its owner: its other link may be the workspace's.
    UniqueFd file(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat opened {};
    if (!file || ::fstat(file.get(), &opened) != 0 || opened.st_ino != st.st_ino)
      return Error::from_errno("session", "open " + prefix + name);
    // A file moved into the workspace took the workspace's owner, and its
    // layer's owner is lost: the copy takes its directory's in the layer
    // (the sandbox's, as the files a run makes have). Made outside the
    // layer: a crash leaves no stray file in it for a commit to pick up.
    struct stat as_copied = opened;
    as_copied.st_uid = dir_stat.st_uid;
    as_copied.st_gid = dir_stat.st_gid;
    PB_CHECK(replace_with_copy(dir, name, file.get(), as_copied, opened.st_mode & 07777,
                               prefix + name,
                               /*with_owner=*/true, /*durable=*/true, nullptr, temp_dir));
    replaced = true;
    ++copied;
  }
  if (replaced && ::fsync(dir) != 0) return Error::from_errno("session", "fsync " + prefix);
  return core::ok_status();
}

}  // namespace

core::Result<std::size_t> unshare_layer_files(const std::filesystem::path& layer) {
  PB_TRY(dir, open_layer(layer));
  PB_TRY(temp_dir, open_layer(layer.parent_path()));
  std::size_t copied = 0;
  PB_CHECK(unshare_in(dir.get(), "", 0, temp_dir.get(), copied));
  return copied;
}

core::Status remove_layer_tree(const std::filesystem::path& path) {
  PB_TRY(parent, core::open_directory(path.parent_path()));
  return remove_tree_fd(parent.get(), path.filename().string());
}

}  // namespace pulsebox::workspace
