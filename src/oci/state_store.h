// The OCI runtime's state, without a daemon: one directory per container
// under --root, each holding `lock`, `state.json`, `config.json` and
// `exec.fifo` (design §5). Every command re-reads it; nothing else remembers
// a container.
//
// The root is checked before use (a directory owned by this user, not group
// or world writable: another user must not plant or swap records), and every
// access goes through its descriptor with O_NOFOLLOW, under an ID that
// cannot name anything but a direct child of it.
//
//   auto store = StateStore::open(root);            // mkdir 0700 + checks
//   auto dir = store->create(id);                   // new <id>/, LOCK_EX held
//   dir->write_record(record);                      // tmp + rename (no fsync: see write_record)
//   auto dir = store->open(id, /*exclusive=*/false);
//   Status s = status_of(*dir, *dir->read_record());
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "oci/process_ref.h"

namespace pulsebox::oci {

// The runtime-spec version `state` reports.
inline constexpr std::string_view kOciVersion = "1.2.1";

enum class Status { Creating, Created, Running, Stopped };
const char* status_name(Status status);

// What create recorded in state.json.
struct ContainerRecord {
  enum class Phase { Creating, Created };
  std::string id;
  std::string bundle;
  std::string rootfs;
  std::string created;  // RFC 3339 with nanoseconds, UTC
  std::string owner;
  Phase phase = Phase::Creating;
  ProcessRef process;                      // pid 0: none yet
  std::vector<std::string> cgroup_leaves;  // absolute directories, made by create
  // The leaves create was about to make, recorded before the first mkdir: a
  // create killed before it recorded cgroup_leaves leaves these, which
  // delete and reconcile only rmdir (never kill: one may be another's).
  std::vector<std::string> planned_cgroup_leaves;
  std::uint64_t namespace_flags = 0;
  std::map<std::string, std::string> annotations;
  std::string enforced;  // the enforcement report (§4)
  // The poststart and poststop hooks, as config.json has them
  // (oci/hooks.h): start and delete run them without config.json. Null:
  // none.
  nlohmann::json runtime_hooks;
};

nlohmann::json record_to_json(const ContainerRecord& record);
// `source` names the file in errors.
core::Result<ContainerRecord> record_from_json(std::string_view text, std::string_view source);

// runc's `state` document: ociVersion, id, pid (0 unless created or
// running), status, bundle, rootfs, created, owner, annotations (with
// org.pulsebox.enforced).
nlohmann::json state_document(const ContainerRecord& record, Status status);

// The current time as runc writes `created`: 2026-12-02T01:22:58.123456789Z.
std::string rfc3339_now();

// `^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$`: never ".", "..", a slash or empty.
bool valid_container_id(std::string_view id);

// The lock-holding handle on one container's directory.
class ContainerDir {
 public:
  const std::string& id() const { return id_; }
  int fd() const { return dir_fd_.get(); }
  // The shared lock could not be taken: a `create` holds it.
  bool creator_holds_lock() const { return creator_holds_lock_; }
  // kInvalidInput "no state record" when state.json is missing (a create
  // killed before it wrote one).
  core::Result<ContainerRecord> read_record() const;
  core::Status write_record(const ContainerRecord& record) const;
  // exec.fifo is there and the container's process still holds its read
  // end (closed at its execve): the container waits for start. A fifo with
  // no reader is what a start killed after writing its byte leaves: the
  // program runs.
  bool waits_for_start() const;
  // state.json is there (read_record() may still find it damaged).
  bool has_record() const;
  // Removes every file of the directory and the directory itself (an
  // exclusive handle only). Idempotent.
  core::Status remove();

 private:
  friend class StateStore;
  std::string id_;
  core::UniqueFd root_fd_, dir_fd_, lock_fd_;
  bool exclusive_ = false;
  bool creator_holds_lock_ = false;
};

class StateStore {
 public:
  // Makes `root` (mode 0700, parents as needed) and checks it: a directory,
  // owned by this effective user, not writable by group or others.
  static core::Result<StateStore> open(const std::filesystem::path& root);
  // The default root: /run/pulsebox-oci for root, else
  // $XDG_RUNTIME_DIR/pulsebox-oci (an error when that is unset).
  static core::Result<std::filesystem::path> default_root();

  // <id>/ (0700) with LOCK_EX on <id>/lock, held while the handle lives;
  // made under staging_name() and renamed into place already locked.
  // "container ID already exists" when it does.
  core::Result<ContainerDir> create(std::string_view id);
  // An existing container: "container ID does not exist" (kInvalidInput,
  // the wording engines match as not-found). `exclusive` waits a bounded
  // time for LOCK_EX; otherwise a shared lock is tried once, and a creator
  // holding it is reported by creator_holds_lock().
  core::Result<ContainerDir> open(std::string_view id, bool exclusive);
  // LOCK_EX only if it is free within a second (reconcile), time enough for
  // the cloned process of a create killed a moment ago to die with the
  // descriptor it inherited: kConcurrentModification when another command
  // still holds the lock.
  core::Result<ContainerDir> try_open_exclusive(std::string_view id);
  // The IDs of the directories in the root, sorted.
  std::vector<std::string> ids() const;
  // Removes the staging directories of creates whose process is gone (one
  // killed between its mkdir and its rename); returns their names.
  std::vector<std::string> remove_stale_staging();
  // ".creating-<pid>-<id>": where create makes and locks <id> first.
  static std::string staging_name(pid_t creator, std::string_view id);

  const std::filesystem::path& root() const { return root_; }

 private:
  enum class Lock { Shared, Exclusive, ExclusiveIfFreeSoon };
  core::Result<ContainerDir> open_locked(std::string_view id, Lock lock);

  std::filesystem::path root_;
  core::UniqueFd root_fd_;
};

// The pure rule of §1.4: creating while its creator holds the lock (a
// stopped one once that lock is free), stopped when the process is gone (or
// is not the recorded one), created while exec.fifo is there, else running.
Status status_from(const ContainerRecord& record, bool creator_holds_lock, bool fifo_present,
                   const std::optional<ProcessStat>& stat);
// The same from the live system (/proc, the directory).
Status status_of(const ContainerDir& dir, const ContainerRecord& record);

}  // namespace pulsebox::oci
