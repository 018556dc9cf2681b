#include "oci/tmpcopyup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

#include "core/fs.h"
#include "linux/rooted_mounts.h"
#include "oci/invalid_input.h"
#include "server/protocol.h"

namespace pulsebox::oci {
namespace {

constexpr int kMaxDepth = 64;
constexpr long kMaxEntries = 100000;

core::Error fail(const std::string& destination, const std::string& what) {
  return core::Error::from_errno("oci", "tmpcopyup of " + destination + ": " + what);
}

// The kernel's overflow id (what an unmapped id shows as), 65534 by default.
std::uint32_t overflow_id(const char* file) {
  core::UniqueFd fd(::open(file, O_RDONLY | O_CLOEXEC));
  auto text = fd ? core::read_all(fd.get(), 64, file) : core::Result<std::string>(std::string());
  try {
    if (text && !text->empty()) return static_cast<std::uint32_t>(std::stoul(*text));
  } catch (const std::exception&) {
  }
  return 65534;
}

struct Copy {
  Copy(const std::string& destination_, const linux_api::IdMaps* maps_)
      : destination(destination_), maps(maps_) {
    if (maps == nullptr) return;
    overflow_uid = overflow_id("/proc/sys/kernel/overflowuid");
    overflow_gid = overflow_id("/proc/sys/kernel/overflowgid");
  }

  const std::string& destination;
  const linux_api::IdMaps* maps = nullptr;
  // What an owner the maps leave out becomes (root's copy only).
  std::uint32_t overflow_uid = 65534, overflow_gid = 65534;
  long entries = 0;

  std::pair<uid_t, gid_t> owner(const struct stat& source) const {
    if (maps == nullptr) return {source.st_uid, source.st_gid};
    return {shifted_id(maps->uids, source.st_uid, overflow_uid),
            shifted_id(maps->gids, source.st_gid, overflow_gid)};
  }

  core::Status owner_and_mode(int dir, const char* name, const struct stat& source, bool link) {
    const int at = (name[0] == '\0' ? AT_EMPTY_PATH : 0) | (link ? AT_SYMLINK_NOFOLLOW : 0);
    const auto [uid, gid] = owner(source);
    if (::fchownat(dir, name, uid, gid, at) != 0) {
      // Inside a user namespace (an ordinary user's copy): an owner it
      // does not map is refused rather than replaced.
      if (errno == EINVAL)
        return oci::invalid("tmpcopyup of " + destination + ": " + name +
                            " is owned by an id the container's user namespace does not map; "
                            "give it an owner the maps cover in the image");
      return fail(destination, std::string("setting the owner of ") + name);
    }
    if (!link && name[0] != '\0' && ::fchmodat(dir, name, source.st_mode & 07777, 0) != 0)
      return fail(destination, std::string("setting the mode of ") + name);
    return core::ok_status();
  }

  core::Status file(int from, int to, const char* name, const struct stat& listed) {
    core::UniqueFd in(::openat(from, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat opened {};
    // Swapped for something else since it was listed: left out.
    if (!in || ::fstat(in.get(), &opened) != 0 || !S_ISREG(opened.st_mode) ||
        opened.st_ino != listed.st_ino)
      return core::ok_status();
    core::UniqueFd out(
        ::openat(to, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out) return fail(destination, std::string("creating ") + name);
    char buffer[65536];
    for (;;) {
      const ssize_t n = ::read(in.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(destination, std::string("reading ") + name);
      if (n == 0) break;
      PB_CHECK(
          core::write_all(out.get(), std::string_view(buffer, static_cast<std::size_t>(n)), name));
    }
    return owner_and_mode(to, name, opened, false);
  }

  core::Status tree(int from, int to, int depth) {
    if (depth > kMaxDepth)
      return core::Error(core::ErrorKind::kResource, "oci",
                         "tmpcopyup of " + destination + ": deeper than " +
                             std::to_string(kMaxDepth) + " directories");
    DIR* listing = ::fdopendir(::openat(from, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (listing == nullptr) return fail(destination, "listing a directory");
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(listing)) {
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(listing);
    for (const auto& name : names) {
      if (++entries > kMaxEntries)
        return core::Error(core::ErrorKind::kResource, "oci",
                           "tmpcopyup of " + destination + ": more than " +
                               std::to_string(kMaxEntries) + " entries");
      struct stat listed {};
      if (::fstatat(from, name.c_str(), &listed, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(listed.st_mode)) {
        if (::mkdirat(to, name.c_str(), 0700) != 0)
          return fail(destination, "making the directory " + name);
        core::UniqueFd sub_from(
            ::openat(from, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        core::UniqueFd sub_to(
            ::openat(to, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!sub_from || !sub_to) continue;  // swapped since listed: left out
        PB_CHECK(tree(sub_from.get(), sub_to.get(), depth + 1));
        PB_CHECK(owner_and_mode(to, name.c_str(), listed, false));
      } else if (S_ISLNK(listed.st_mode)) {
        char target[4096];
        const ssize_t n = ::readlinkat(from, name.c_str(), target, sizeof target - 1);
        if (n < 0) continue;
        target[n] = '\0';
        if (::symlinkat(target, to, name.c_str()) != 0)
          return fail(destination, "making the symlink " + name);
        PB_CHECK(owner_and_mode(to, name.c_str(), listed, true));
      } else if (S_ISREG(listed.st_mode)) {
        PB_CHECK(file(from, to, name.c_str(), listed));
      }
    }
    return core::ok_status();
  }
};

}  // namespace

std::uint32_t shifted_id(const std::vector<linux_api::IdMapping>& map, std::uint32_t id,
                         std::uint32_t overflow) {
  for (const auto& range : map) {
    if (id >= range.inside && id - range.inside < range.count)
      return range.outside + (id - range.inside);
  }
  return overflow;
}

namespace {

// The helper's answer: the tree's descriptor (with a one-byte message), or
// an error message and no descriptor.
void send_result(int socket, const core::Result<core::UniqueFd>& tree) {
  if (tree)
    (void)server::send_message(socket, std::string_view("\0", 1), {tree->get()});
  else
    (void)server::send_message(socket, tree.error().message());
}

core::Result<core::UniqueFd> receive_result(int socket, const std::string& destination) {
  auto answer = server::receive_message(socket, 4096, 1);
  if (!answer) return fail(destination, "the copying helper ended without an answer");
  if (!answer->fds.empty()) return std::move(answer->fds.front());
  return core::Error(core::ErrorKind::kIo, "oci", answer->bytes);
}

}  // namespace

core::Result<core::UniqueFd> make_tmpcopyup_in_user_namespace(const std::string& rootfs,
                                                              const std::string& destination,
                                                              const std::string& data,
                                                              unsigned long flags,
                                                              const linux_api::IdMaps& maps) {
  PB_TRY(mapping, linux_api::create_mapping_namespace(maps));
  const core::UniqueFd& user_namespace = mapping.ns;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return fail(destination, "socketpair");
  core::UniqueFd ours(pair[0]), theirs(pair[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return fail(destination, "fork");
  if (pid == 0) {
    // A single-threaded child may join a user namespace; there it owns a
    // mount namespace of its own, so it may make the tmpfs.
    core::Result<core::UniqueFd> tree =
        ::setns(user_namespace.get(), CLONE_NEWUSER) != 0
            ? fail(destination, "joining the container's user namespace")
        : ::unshare(CLONE_NEWNS) != 0 ? fail(destination, "making a mount namespace")
                                      : make_tmpcopyup(rootfs, destination, data, flags);
    send_result(theirs.get(), tree);
    ::_exit(0);
  }
  theirs.reset();
  auto tree = receive_result(ours.get(), destination);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return tree;
}

core::Result<core::UniqueFd> make_tmpcopyup(const std::string& rootfs,
                                            const std::string& destination, const std::string& data,
                                            unsigned long flags, const linux_api::IdMaps* maps) {
  core::UniqueFd context(::fsopen("tmpfs", FSOPEN_CLOEXEC));
  if (!context) return fail(destination, "fsopen tmpfs");
  std::size_t start = 0;
  while (start < data.size()) {
    const std::size_t end = std::min(data.find(',', start), data.size());
    const std::string option = data.substr(start, end - start);
    start = end + 1;
    if (option.empty()) continue;
    const auto equals = option.find('=');
    const int rc =
        equals == std::string::npos
            ? ::fsconfig(context.get(), FSCONFIG_SET_FLAG, option.c_str(), nullptr, 0)
            : ::fsconfig(context.get(), FSCONFIG_SET_STRING, option.substr(0, equals).c_str(),
                         option.substr(equals + 1).c_str(), 0);
    if (rc != 0) return fail(destination, "the tmpfs option " + option);
  }
  if (::fsconfig(context.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
    return fail(destination, "creating the tmpfs");
  // Read-only only once it is filled: the attributes are set after the copy.
  core::UniqueFd mount(
      ::fsmount(context.get(), FSMOUNT_CLOEXEC,
                static_cast<unsigned>(linux_api::mount_attributes(flags & ~MS_RDONLY))));
  if (!mount) return fail(destination, "fsmount");

  core::UniqueFd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return fail(destination, "opening the root " + rootfs);
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  core::UniqueFd source(
      static_cast<int>(::syscall(SYS_openat2, root.get(), destination.c_str(), &how, sizeof how)));
  if (!source) {
    if (errno != ENOENT) return fail(destination, "opening it in the root");
    // Nothing in the image there: an empty tmpfs, the container root's.
    if (maps != nullptr) {
      const struct stat root_owned {};
      const auto [uid, gid] = Copy(destination, maps).owner(root_owned);
      if (::fchownat(mount.get(), "", uid, gid, AT_EMPTY_PATH) != 0)
        return fail(destination, "setting the owner of the tmpfs's root");
    }
    return mount;
  }
  Copy copy{destination, maps};
  PB_CHECK(copy.tree(source.get(), mount.get(), 0));
  // The tmpfs's root takes the image directory's owner and mode (the
  // mount's descriptor is O_PATH: its mode is set through /proc).
  struct stat top {};
  const std::string self = "/proc/self/fd/" + std::to_string(mount.get());
  if (::fstat(source.get(), &top) != 0 ||
      ::fchownat(mount.get(), "", copy.owner(top).first, copy.owner(top).second, AT_EMPTY_PATH) !=
          0 ||
      ::chmod(self.c_str(), top.st_mode & 07777) != 0)
    return fail(destination, "setting the owner and mode of the tmpfs's root");
  if ((flags & MS_RDONLY) != 0) {
    mount_attr read_only{};
    read_only.attr_set = MOUNT_ATTR_RDONLY;
    if (::syscall(SYS_mount_setattr, mount.get(), "", AT_EMPTY_PATH, &read_only,
                  sizeof read_only) != 0)
      return fail(destination, "making the tmpfs read-only");
  }
  return mount;
}

}  // namespace pulsebox::oci
