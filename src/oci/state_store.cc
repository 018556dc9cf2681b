#include "oci/state_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <re2/re2.h>
#include <signal.h>
#include <stdio.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "core/fs.h"
#include "core/json_parse.h"
#include "oci/invalid_input.h"

namespace pulsebox::oci {

namespace {

constexpr const char* kStateFile = "state.json";
constexpr const char* kStateTemp = "state.json.tmp";
constexpr const char* kLockFile = "lock";
constexpr const char* kFifo = "exec.fifo";
// A container directory being made: never a valid ID (IDs start with an
// alphanumeric), so ids() and open() never see it.
constexpr std::string_view kStagingPrefix = ".creating-";
// What a container directory may hold; remove() unlinks these and refuses
// anything else rather than guess.
constexpr const char* kKnownFiles[] = {kStateTemp, kStateFile, "config.json", kFifo, kLockFile};

core::Error not_found(std::string_view id) {
  return invalid("container " + std::string(id) + " does not exist");
}

core::Error bad_id(std::string_view id) {
  return invalid("invalid container ID \"" + std::string(id).substr(0, 200) +
                 "\": it must match ^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$");
}

// Opens (creating) <dir>/lock and takes the lock `operation`.
core::Result<core::UniqueFd> open_lock(int dir_fd, bool create) {
  core::UniqueFd fd(
      ::openat(dir_fd, kLockFile, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600));
  if (!fd) return core::Error::from_errno("oci", "opening the container's lock file");
  return fd;
}

const char* phase_name(ContainerRecord::Phase phase) {
  return phase == ContainerRecord::Phase::Created ? "created" : "creating";
}

}  // namespace

const char* status_name(Status status) {
  switch (status) {
    case Status::Creating:
      return "creating";
    case Status::Created:
      return "created";
    case Status::Running:
      return "running";
    case Status::Stopped:
      return "stopped";
  }
  return "stopped";
}

bool valid_container_id(std::string_view id) {
  static const RE2 pattern("[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}");
  return RE2::FullMatch(re2::StringPiece(id.data(), id.size()), pattern);
}

std::string rfc3339_now() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  tm utc{};
  ::gmtime_r(&now.tv_sec, &utc);
  char text[64];
  const auto n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%09ldZ", now.tv_nsec);
  return text;
}

nlohmann::json record_to_json(const ContainerRecord& record) {
  nlohmann::json out{
      {"id", record.id},
      {"bundle", record.bundle},
      {"rootfs", record.rootfs},
      {"created", record.created},
      {"owner", record.owner},
      {"phase", phase_name(record.phase)},
      {"pid", record.process.pid},
      {"start_time", record.process.start_time},
      {"cgroup_leaves", record.cgroup_leaves},
      {"planned_cgroup_leaves", record.planned_cgroup_leaves},
      {"namespace_flags", record.namespace_flags},
      {"annotations", record.annotations},
      {"enforced", record.enforced},
  };
  if (!record.runtime_hooks.is_null()) out["hooks"] = record.runtime_hooks;
  return out;
}

core::Result<ContainerRecord> record_from_json(std::string_view text, std::string_view source) {
  PB_TRY(json, core::parse_json(text, source));
  const auto wrong = [&](const std::string& key, const char* type) {
    return invalid(std::string(source) + ": \"" + key + "\" is missing or not " + type +
                   " (a damaged record: `delete --force` or `reconcile` removes it)");
  };
  if (!json.is_object()) return wrong("(document)", "an object");
  ContainerRecord record;
  using StringField = std::pair<const char*, std::string*>;
  for (auto [key, field] : std::initializer_list<StringField>{{"id", &record.id},
                                                              {"bundle", &record.bundle},
                                                              {"rootfs", &record.rootfs},
                                                              {"created", &record.created},
                                                              {"owner", &record.owner},
                                                              {"enforced", &record.enforced}}) {
    if (!json.contains(key) || !json[key].is_string()) return wrong(key, "a string");
    *field = json[key].get<std::string>();
  }
  if (!json.contains("phase") || !json["phase"].is_string()) return wrong("phase", "a string");
  const auto phase = json["phase"].get<std::string>();
  if (phase == "created") {
    record.phase = ContainerRecord::Phase::Created;
  } else if (phase == "creating") {
    record.phase = ContainerRecord::Phase::Creating;
  } else {
    return wrong("phase", "\"creating\" or \"created\"");
  }
  if (!json.contains("pid") || !json["pid"].is_number_integer() || json["pid"].get<long>() < 0 ||
      json["pid"].get<long>() > 0x7fffffff)
    return wrong("pid", "a pid");
  record.process.pid = static_cast<pid_t>(json["pid"].get<long>());
  using NumberField = std::pair<const char*, std::uint64_t*>;
  for (auto [key, field] :
       std::initializer_list<NumberField>{{"start_time", &record.process.start_time},
                                          {"namespace_flags", &record.namespace_flags}}) {
    if (!json.contains(key) || !json[key].is_number_unsigned()) return wrong(key, "a number");
    *field = json[key].get<std::uint64_t>();
  }
  // planned_cgroup_leaves is absent in records older than the field.
  for (auto [key, leaves, required] :
       {std::tuple{"cgroup_leaves", &record.cgroup_leaves, true},
        std::tuple{"planned_cgroup_leaves", &record.planned_cgroup_leaves, false}}) {
    if (!json.contains(key) && !required) continue;
    if (!json.contains(key) || !json[key].is_array()) return wrong(key, "an array");
    for (const auto& leaf : json[key]) {
      if (!leaf.is_string() || leaf.get<std::string>().rfind("/", 0) != 0)
        return wrong(key, "an array of absolute paths");
      leaves->push_back(leaf.get<std::string>());
    }
  }
  if (!json.contains("annotations") || !json["annotations"].is_object())
    return wrong("annotations", "an object");
  for (const auto& [key, value] : json["annotations"].items()) {
    if (!value.is_string()) return wrong("annotations." + key, "a string");
    record.annotations[key] = value.get<std::string>();
  }
  if (json.contains("hooks")) {
    if (!json["hooks"].is_object()) return wrong("hooks", "an object");
    record.runtime_hooks = json["hooks"];
  }
  return record;
}

nlohmann::json state_document(const ContainerRecord& record, Status status) {
  auto annotations = nlohmann::json(record.annotations);
  if (!record.enforced.empty()) annotations["org.pulsebox.enforced"] = record.enforced;
  const bool alive = status == Status::Created || status == Status::Running;
  return nlohmann::json{
      {"ociVersion", std::string(kOciVersion)},
      {"id", record.id},
      {"pid", alive ? record.process.pid : 0},
      {"status", status_name(status)},
      {"bundle", record.bundle},
      {"rootfs", record.rootfs},
      {"created", record.created},
      {"owner", record.owner},
      {"annotations", annotations},
  };
}

core::Result<ContainerRecord> ContainerDir::read_record() const {
  core::UniqueFd fd(::openat(dir_fd_.get(), kStateFile, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return invalid("container " + id_ + " has no state record");
    return core::Error::from_errno("oci", "opening " + id_ + "/" + kStateFile);
  }
  PB_TRY(text, core::read_all(fd.get(), 1 << 20, kStateFile));
  return record_from_json(text, id_ + "/" + kStateFile);
}

core::Status ContainerDir::write_record(const ContainerRecord& record) const {
  const std::string text = record_to_json(record).dump(2) + "\n";
  core::UniqueFd fd(::openat(dir_fd_.get(), kStateTemp,
                             O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return core::Error::from_errno("oci", "writing " + id_ + "/" + kStateTemp);
  PB_CHECK(core::write_all(fd.get(), text, kStateTemp));
  // The rename makes the record whole or absent for any reader, whatever
  // kills this process. There is no fsync: the record describes processes
  // and cgroups, which a power loss ends too, and reconcile removes a
  // record a reboot left empty or unreadable.
  if (::renameat(dir_fd_.get(), kStateTemp, dir_fd_.get(), kStateFile) != 0)
    return core::Error::from_errno("oci", "renaming the state record into place");
  return core::ok_status();
}

bool ContainerDir::has_record() const {
  struct stat st {};
  return ::fstatat(dir_fd_.get(), kStateFile, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

bool ContainerDir::waits_for_start() const {
  // Opening for writing delivers nothing: the reader waits for a byte.
  // Only a fifo counts: anything else put there (a file, a symlink, a
  // directory) is no process waiting.
  struct stat st {};
  core::UniqueFd fifo(
      ::openat(dir_fd_.get(), kFifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (fifo) return ::fstat(fifo.get(), &st) == 0 && S_ISFIFO(st.st_mode);
  if (errno != EACCES && errno != EPERM) return false;  // ENXIO: no reader, ENOENT: gone
  // Not ours to open (another user's state): there, if it is a fifo.
  return ::fstatat(dir_fd_.get(), kFifo, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(st.st_mode);
}

core::Status ContainerDir::remove() {
  if (!exclusive_) return core::Error(core::ErrorKind::kInternal, "oci", "remove without LOCK_EX");
  // A file pulsebox never writes there stops the removal: it is reported,
  // not deleted blindly.
  core::UniqueFd listing(::openat(dir_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (DIR* dir = listing ? ::fdopendir(listing.release()) : nullptr) {
    std::string stranger;
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      if (std::find(std::begin(kKnownFiles), std::end(kKnownFiles), name) == std::end(kKnownFiles))
        stranger = std::string(name);
    }
    ::closedir(dir);
    if (!stranger.empty())
      return invalid("container directory " + id_ + " holds \"" + stranger +
                     "\", which pulsebox did not write: remove it by hand");
  }
  for (const char* name : kKnownFiles) {
    if (::unlinkat(dir_fd_.get(), name, 0) != 0 && errno != ENOENT)
      return core::Error::from_errno("oci", "removing " + id_ + "/" + name);
  }
  if (::unlinkat(root_fd_.get(), id_.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return core::Error::from_errno("oci", "removing the container directory " + id_);
  return core::ok_status();
}

core::Result<std::filesystem::path> StateStore::default_root() {
  if (::geteuid() == 0) return std::filesystem::path("/run/pulsebox-oci");
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  if (runtime_dir == nullptr || runtime_dir[0] != '/')
    return invalid(
        "--root: no default for an ordinary user without $XDG_RUNTIME_DIR: give --root DIR");
  return std::filesystem::path(runtime_dir) / "pulsebox-oci";
}

core::Result<StateStore> StateStore::open(const std::filesystem::path& root) {
  if (!root.is_absolute())
    return invalid("--root " + root.string() + ": give an absolute directory");
  std::error_code ec;
  std::filesystem::create_directories(root.parent_path(), ec);
  if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST)
    return core::Error::from_errno("oci", "--root: making " + root.string());
  StateStore store;
  store.root_ = root;
  store.root_fd_.reset(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!store.root_fd_)
    return core::Error::from_errno(
        "oci", "--root: opening " + root.string() + " (it must be a directory, not a symlink)");
  struct stat st {};
  if (::fstat(store.root_fd_.get(), &st) != 0)
    return core::Error::from_errno("oci", "--root: " + root.string());
  if (st.st_uid != ::geteuid())
    return core::Error(core::ErrorKind::kSecurity, "oci",
                       "--root " + root.string() + " is owned by uid " + std::to_string(st.st_uid) +
                           ", not by this user (" + std::to_string(::geteuid()) +
                           "): use a directory of your own");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return core::Error(core::ErrorKind::kSecurity, "oci",
                       "--root " + root.string() +
                           " is writable by group or others: another user could plant or swap "
                           "container records; chmod go-w it or use another directory");
  return store;
}

core::Result<ContainerDir> StateStore::create(std::string_view id) {
  if (!valid_container_id(id)) return bad_id(id);
  const std::string name(id);
  // The directory is made and locked under a staging name no ID can take,
  // then renamed into place: `<id>` never exists unlocked, so a reconcile
  // cannot take a fresh create's directory for a crashed one.
  const std::string staging = staging_name(::getpid(), name);
  if (::mkdirat(root_fd_.get(), staging.c_str(), 0700) != 0)
    return core::Error::from_errno("oci", "making the container directory " + staging);
  ContainerDir dir;
  dir.id_ = name;
  dir.exclusive_ = true;
  dir.root_fd_.reset(::fcntl(root_fd_.get(), F_DUPFD_CLOEXEC, 3));
  dir.dir_fd_.reset(
      ::openat(root_fd_.get(), staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  const auto abandon = [&](core::Error error) -> core::Error {
    ::unlinkat(root_fd_.get(), (staging + "/" + kLockFile).c_str(), 0);
    ::unlinkat(root_fd_.get(), staging.c_str(), AT_REMOVEDIR);
    return error;
  };
  if (!dir.dir_fd_)
    return abandon(core::Error::from_errno("oci", "opening the container directory " + staging));
  auto lock = open_lock(dir.dir_fd_.get(), true);
  if (!lock) return abandon(std::move(lock).error());
  if (::flock(lock->get(), LOCK_EX) != 0)
    return abandon(core::Error::from_errno("oci", "locking the container directory " + name));
  dir.lock_fd_ = std::move(*lock);
  if (::renameat2(root_fd_.get(), staging.c_str(), root_fd_.get(), name.c_str(),
                  RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) return abandon(invalid("container " + name + " already exists"));
    return abandon(core::Error::from_errno("oci", "renaming " + staging + " to " + name));
  }
  return dir;
}

std::string StateStore::staging_name(pid_t creator, std::string_view id) {
  return std::string(kStagingPrefix) + std::to_string(creator) + "-" + std::string(id);
}

std::vector<std::string> StateStore::remove_stale_staging() {
  std::vector<std::string> removed;
  std::vector<std::string> names;
  core::UniqueFd listing(::openat(root_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (DIR* dir = listing ? ::fdopendir(listing.release()) : nullptr) {
    while (const dirent* entry = ::readdir(dir)) {
      if (std::string_view(entry->d_name).rfind(kStagingPrefix, 0) == 0)
        names.emplace_back(entry->d_name);
    }
    ::closedir(dir);
  }
  for (const auto& name : names) {
    // Only a creator that is gone: its pid no longer exists (a reused pid
    // keeps the directory, which is the safe side).
    const std::string rest = name.substr(std::string_view(kStagingPrefix).size());
    const long creator = std::strtol(rest.c_str(), nullptr, 10);
    if (creator <= 0 || ::kill(static_cast<pid_t>(creator), 0) == 0 || errno != ESRCH) continue;
    core::UniqueFd fd(
        ::openat(root_fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) continue;
    ::unlinkat(fd.get(), kLockFile, 0);
    if (::unlinkat(root_fd_.get(), name.c_str(), AT_REMOVEDIR) == 0) removed.push_back(name);
  }
  return removed;
}

core::Result<ContainerDir> StateStore::open(std::string_view id, bool exclusive) {
  return open_locked(id, exclusive ? Lock::Exclusive : Lock::Shared);
}

core::Result<ContainerDir> StateStore::try_open_exclusive(std::string_view id) {
  return open_locked(id, Lock::ExclusiveIfFreeSoon);
}

core::Result<ContainerDir> StateStore::open_locked(std::string_view id, Lock mode) {
  const bool exclusive = mode != Lock::Shared;
  // An ID that could not have been created does not exist, whatever it names.
  if (!valid_container_id(id)) return not_found(id);
  const std::string name(id);
  ContainerDir dir;
  dir.id_ = name;
  dir.exclusive_ = exclusive;
  dir.root_fd_.reset(::fcntl(root_fd_.get(), F_DUPFD_CLOEXEC, 3));
  dir.dir_fd_.reset(
      ::openat(root_fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir.dir_fd_) {
    if (errno == ENOENT) return not_found(id);
    return core::Error::from_errno("oci", "opening the container directory " + name);
  }
  // A directory without its lock file is a create killed right after mkdir.
  PB_TRY(lock, open_lock(dir.dir_fd_.get(), true));
  if (exclusive) {
    // A create or delete in progress ends soon; one stopped in a debugger
    // must not hang engines forever, nor reconcile for long.
    const int attempts = mode == Lock::Exclusive ? 500 : 100;
    int attempt = 0;
    while (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK || ++attempt == attempts)
        return core::Error(core::ErrorKind::kConcurrentModification, "oci",
                           "container " + name +
                               " is locked by another pulsebox-runc command (create, delete); "
                               "try again when it has ended");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } else if (::flock(lock.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return core::Error::from_errno("oci", "locking " + name);
    dir.creator_holds_lock_ = true;
  }
  dir.lock_fd_ = std::move(lock);
  return dir;
}

std::vector<std::string> StateStore::ids() const {
  std::vector<std::string> ids;
  core::UniqueFd listing(::openat(root_fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* dir = listing ? ::fdopendir(listing.release()) : nullptr;
  if (dir == nullptr) return ids;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_type == DT_DIR && valid_container_id(entry->d_name))
      ids.emplace_back(entry->d_name);
  }
  ::closedir(dir);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status status_from(const ContainerRecord& record, bool creator_holds_lock, bool fifo_present,
                   const std::optional<ProcessStat>& stat) {
  if (record.phase == ContainerRecord::Phase::Creating)
    return creator_holds_lock ? Status::Creating : Status::Stopped;
  if (record.process.pid <= 0 || !stat || stat->start_time != record.process.start_time ||
      stat->state == 'Z' || stat->state == 'X')
    return Status::Stopped;
  return fifo_present ? Status::Created : Status::Running;
}

Status status_of(const ContainerDir& dir, const ContainerRecord& record) {
  return status_from(record, dir.creator_holds_lock(), dir.waits_for_start(),
                     read_process_stat(record.process.pid));
}

}  // namespace pulsebox::oci
