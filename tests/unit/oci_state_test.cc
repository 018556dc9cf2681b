// The OCI runtime's state without a daemon (src/oci/state_store.h,
// src/oci/process_ref.h): records, IDs, the --root checks, the status rule
// and signal names. No privileges needed.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "helpers/test_support.h"
#include "oci/commands/commands.h"
#include "oci/process_ref.h"
#include "oci/state_store.h"

namespace pulsebox::oci {
namespace {

namespace fs = std::filesystem;

ContainerRecord sample_record() {
  ContainerRecord record;
  record.id = "c1";
  record.bundle = "/b";
  record.rootfs = "/b/rootfs";
  record.created = "2026-12-02T01:22:58.123456789Z";
  record.owner = "";
  record.phase = ContainerRecord::Phase::Created;
  record.process = {1234, 98765};
  record.cgroup_leaves = {"/sys/fs/cgroup/unified/x/c1", "/sys/fs/cgroup/memory/x/c1"};
  record.planned_cgroup_leaves = {"/sys/fs/cgroup/unified/x/c1", "/sys/fs/cgroup/memory/x/c1",
                                  "/sys/fs/cgroup/pids/x/c1"};
  record.namespace_flags = 0x20000;
  record.annotations = {{"a", "b"}};
  record.enforced = "cgroup=v1:memory";
  return record;
}

TEST(OciRecord, RoundTrips) {
  const auto record = sample_record();
  const auto back = record_from_json(record_to_json(record).dump(), "state.json");
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->id, "c1");
  EXPECT_EQ(back->phase, ContainerRecord::Phase::Created);
  EXPECT_EQ(back->process.pid, 1234);
  EXPECT_EQ(back->process.start_time, 98765u);
  EXPECT_EQ(back->cgroup_leaves, record.cgroup_leaves);
  EXPECT_EQ(back->planned_cgroup_leaves, record.planned_cgroup_leaves);
  EXPECT_EQ(back->namespace_flags, 0x20000u);
  EXPECT_EQ(back->annotations, record.annotations);
  EXPECT_EQ(back->enforced, record.enforced);
}

TEST(OciRecord, DamagedRecordsAreRefusedByField) {
  auto record = record_to_json(sample_record());
  record["pid"] = "12";
  auto result = record_from_json(record.dump(), "c1/state.json");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message().find("\"pid\""), std::string::npos);
  record = record_to_json(sample_record());
  record["cgroup_leaves"] = {"relative/leaf"};
  EXPECT_FALSE(record_from_json(record.dump(), "s").ok());
  record = record_to_json(sample_record());
  record["planned_cgroup_leaves"] = {"relative/leaf"};
  result = record_from_json(record.dump(), "s");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message().find("planned_cgroup_leaves"), std::string::npos);
  // A record written before the field existed is read, with none planned.
  record = record_to_json(sample_record());
  record.erase("planned_cgroup_leaves");
  const auto older = record_from_json(record.dump(), "s");
  ASSERT_TRUE(older.ok()) << older.error().to_string();
  EXPECT_TRUE(older->planned_cgroup_leaves.empty());
  record = record_to_json(sample_record());
  record["phase"] = "running";
  EXPECT_FALSE(record_from_json(record.dump(), "s").ok());
  EXPECT_FALSE(record_from_json("{", "s").ok());
}

TEST(OciRecord, StateDocumentHasRuncFields) {
  const auto record = sample_record();
  const auto running = state_document(record, Status::Running);
  EXPECT_EQ(running["ociVersion"], "1.2.1");
  EXPECT_EQ(running["id"], "c1");
  EXPECT_EQ(running["pid"], 1234);
  EXPECT_EQ(running["status"], "running");
  EXPECT_EQ(running["bundle"], "/b");
  EXPECT_EQ(running["rootfs"], "/b/rootfs");
  EXPECT_EQ(running["created"], record.created);
  EXPECT_EQ(running["owner"], "");
  EXPECT_EQ(running["annotations"]["a"], "b");
  EXPECT_EQ(running["annotations"]["org.pulsebox.enforced"], "cgroup=v1:memory");
  EXPECT_EQ(state_document(record, Status::Stopped)["pid"], 0);
  EXPECT_EQ(state_document(record, Status::Created)["pid"], 1234);
}

TEST(OciRecord, CreatedTimeIsRfc3339WithNanoseconds) {
  const std::string now = rfc3339_now();
  ASSERT_EQ(now.size(), std::string("2026-12-02T01:22:58.123456789Z").size()) << now;
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now[19], '.');
  EXPECT_EQ(now.back(), 'Z');
}

TEST(OciId, Pattern) {
  for (const char* good : {"a", "A1", "libpod-1234abcd", "x.y+z_w-1", "0"})
    EXPECT_TRUE(valid_container_id(good)) << good;
  for (const char* bad : {"", ".", "..", "../x", "a/b", "-a", "_a", ".hidden", "a b", "a\n"})
    EXPECT_FALSE(valid_container_id(bad)) << bad;
  EXPECT_TRUE(valid_container_id(std::string(128, 'a')));
  EXPECT_FALSE(valid_container_id(std::string(129, 'a')));
  EXPECT_FALSE(valid_container_id(std::string("a\0b", 3)));
}

TEST(OciStatus, Rule) {
  auto record = sample_record();
  const ProcessStat alive{'S', record.process.start_time};
  EXPECT_EQ(status_from(record, false, true, alive), Status::Created);
  EXPECT_EQ(status_from(record, false, false, alive), Status::Running);
  EXPECT_EQ(status_from(record, false, false, std::nullopt), Status::Stopped);
  EXPECT_EQ(status_from(record, false, false, ProcessStat{'Z', record.process.start_time}),
            Status::Stopped);
  EXPECT_EQ(status_from(record, false, false, ProcessStat{'X', record.process.start_time}),
            Status::Stopped);
  // The pid names another process now.
  EXPECT_EQ(status_from(record, false, false, ProcessStat{'S', record.process.start_time + 1}),
            Status::Stopped);
  record.phase = ContainerRecord::Phase::Creating;
  EXPECT_EQ(status_from(record, true, true, alive), Status::Creating);
  EXPECT_EQ(status_from(record, false, true, alive), Status::Stopped);
  record.phase = ContainerRecord::Phase::Created;
  record.process.pid = 0;
  EXPECT_EQ(status_from(record, false, false, alive), Status::Stopped);
}

TEST(OciProcess, ParsesStatWithHostileName) {
  // The name is the process's choice: spaces and ')' inside it must not
  // shift the fields.
  std::string text =
      "42 (a) b) c) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 777777 "
      "1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
  const auto stat = parse_process_stat(text);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->start_time, 777777u);
  EXPECT_FALSE(stat->exiting);  // flags 0x400100
  std::string ending = text;
  ending.replace(ending.find("4194560"), 7, "4194564");  // | PF_EXITING
  ASSERT_TRUE(parse_process_stat(ending).has_value());
  EXPECT_TRUE(parse_process_stat(ending)->exiting);
  EXPECT_FALSE(parse_process_stat("42 (x) S 1 2").has_value());
  EXPECT_FALSE(parse_process_stat("garbage").has_value());
}

TEST(OciProcess, OwnStartTimeAndVerifiedPidfd) {
  const auto start = process_start_time(::getpid());
  ASSERT_TRUE(start.has_value());
  EXPECT_GT(*start, 0u);
  EXPECT_TRUE(open_verified_pidfd({::getpid(), *start}).ok());
  const auto wrong = open_verified_pidfd({::getpid(), *start + 1});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().kind(), core::ErrorKind::kUnavailable);
  EXPECT_FALSE(open_verified_pidfd({0, 0}).ok());
}

TEST(OciProcess, ZombieIsNotAlive) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Wait for it to become a zombie without reaping it: /proc still shows it.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
  const auto start = process_start_time(child);
  ASSERT_TRUE(start.has_value());
  EXPECT_FALSE(open_verified_pidfd({child, *start}).ok());
  ::waitpid(child, nullptr, 0);
}

TEST(OciSignal, Names) {
  EXPECT_EQ(parse_signal("15").value(), SIGTERM);
  EXPECT_EQ(parse_signal("9").value(), SIGKILL);
  EXPECT_EQ(parse_signal("KILL").value(), SIGKILL);
  EXPECT_EQ(parse_signal("SIGKILL").value(), SIGKILL);
  EXPECT_EQ(parse_signal("sigterm").value(), SIGTERM);
  EXPECT_EQ(parse_signal("WINCH").value(), SIGWINCH);
  EXPECT_EQ(parse_signal("RTMIN").value(), SIGRTMIN);
  EXPECT_EQ(parse_signal("RTMIN+3").value(), SIGRTMIN + 3);
  EXPECT_EQ(parse_signal("SIGRTMAX-1").value(), SIGRTMAX - 1);
  for (const char* bad : {"", "0", "65", "FOO", "SIG", "RTMIN+99", "RTMIN-1", "-9", "9x"}) {
    const auto result = parse_signal(bad);
    ASSERT_FALSE(result.ok()) << bad;
    EXPECT_NE(result.error().message().find("invalid signal"), std::string::npos);
  }
}

class OciStoreTest : public ::testing::Test {
 protected:
  testing::TempDir temp_;
  fs::path root_ = temp_ / "root";
};

TEST_F(OciStoreTest, MakesRootPrivate) {
  const auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok()) << store.error().to_string();
  struct stat st {};
  ASSERT_EQ(::stat(root_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(OciStoreTest, RefusesSharedRoot) {
  fs::create_directories(root_);
  ::chmod(root_.c_str(), 0777);
  const auto world = StateStore::open(root_);
  ASSERT_FALSE(world.ok());
  EXPECT_NE(world.error().message().find("writable by group or others"), std::string::npos);
  ::chmod(root_.c_str(), 0770);
  EXPECT_FALSE(StateStore::open(root_).ok());
  ::chmod(root_.c_str(), 0755);
  EXPECT_TRUE(StateStore::open(root_).ok());
  EXPECT_FALSE(StateStore::open("relative/root").ok());
  fs::create_symlink(root_, temp_ / "link");
  EXPECT_FALSE(StateStore::open(temp_ / "link").ok());
}

TEST_F(OciStoreTest, RefusesRootOwnedByAnotherUser) {
  PULSEBOX_SKIP_UNLESS_ROOT("chown to another user needs root");
  fs::create_directories(root_);
  ASSERT_EQ(::chown(root_.c_str(), 65534, 65534), 0);
  const auto store = StateStore::open(root_);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message().find("owned by uid 65534"), std::string::npos);
}

TEST_F(OciStoreTest, CreateOpenRemove) {
  auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok());
  {
    auto dir = store->create("c1");
    ASSERT_TRUE(dir.ok()) << dir.error().to_string();
    EXPECT_TRUE(fs::is_directory(root_ / "c1"));
    const auto again = store->create("c1");
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().message(), "container c1 already exists");
    // While create holds the lock, a reader sees a creator at work.
    auto reader = store->open("c1", false);
    ASSERT_TRUE(reader.ok());
    EXPECT_TRUE(reader->creator_holds_lock());
    EXPECT_FALSE(store->try_open_exclusive("c1").ok());
    auto record = sample_record();
    ASSERT_TRUE(dir->write_record(record).ok());
    EXPECT_FALSE(fs::exists(root_ / "c1" / "state.json.tmp"));
    struct stat st {};
    ASSERT_EQ(::stat((root_ / "c1" / "state.json").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  {
    auto reader = store->open("c1", false);
    ASSERT_TRUE(reader.ok());
    EXPECT_FALSE(reader->creator_holds_lock());
    EXPECT_EQ(reader->read_record()->process.pid, 1234);
    // A reader's shared lock keeps reconcile away.
    EXPECT_FALSE(store->try_open_exclusive("c1").ok());
  }
  EXPECT_EQ(store->ids(), std::vector<std::string>{"c1"});
  auto owner = store->open("c1", true);
  ASSERT_TRUE(owner.ok());
  ASSERT_TRUE(owner->remove().ok());
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_TRUE(owner->remove().ok());  // idempotent
}

TEST_F(OciStoreTest, CreateLeavesNoStagingDirectory) {
  auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok());
  auto dir = store->create("c1");
  ASSERT_TRUE(dir.ok());
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(root_))
    entries.push_back(entry.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"c1"});
  EXPECT_TRUE(fs::exists(root_ / "c1" / "lock"));
  // A second create of the ID leaves nothing behind either.
  EXPECT_FALSE(store->create("c1").ok());
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

TEST_F(OciStoreTest, StaleStagingOfADeadCreatorIsRemoved) {
  auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok());
  const pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const auto stale = StateStore::staging_name(dead, "c1");
  const auto live = StateStore::staging_name(::getpid(), "c2");
  testing::write_file(root_ / stale / "lock", "");
  fs::create_directories(root_ / live);
  EXPECT_TRUE(store->ids().empty());  // never taken for containers
  EXPECT_EQ(store->remove_stale_staging(), std::vector<std::string>{stale});
  EXPECT_FALSE(fs::exists(root_ / stale));
  EXPECT_TRUE(fs::exists(root_ / live));  // its creator is alive
}

// A create killed right after its clone leaves the cloned process holding
// the directory's lock (an inherited descriptor) until it has died a few
// milliseconds later. reconcile run at once still removes the container.
TEST_F(OciStoreTest, ReconcileWaitsForALockHeldByAProcessAboutToEnd) {
  auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok());
  pid_t holder = -1;
  {
    auto dir = store->create("c1");
    ASSERT_TRUE(dir.ok());
    auto record = sample_record();
    record.phase = ContainerRecord::Phase::Creating;
    record.process = {};
    record.cgroup_leaves.clear();
    record.planned_cgroup_leaves.clear();
    ASSERT_TRUE(dir->write_record(record).ok());
    holder = ::fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
      ::usleep(300 * 1000);
      ::_exit(0);
    }
  }  // create's own descriptor closed: only the holder's copy is left
  std::vector<std::string> problems;
  const auto removed = commands::reconcile(*store, problems);
  int status = 0;
  ASSERT_EQ(::waitpid(holder, &status, 0), holder);
  EXPECT_EQ(removed, std::vector<std::string>{"c1"});
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_FALSE(fs::exists(root_ / "c1"));
}

TEST_F(OciStoreTest, MissingIdWording) {
  auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok());
  const auto missing = store->open("nope", false);
  ASSERT_FALSE(missing.ok());
  // containerd and podman match these words as not-found.
  EXPECT_EQ(missing.error().message(), "container nope does not exist");
}

TEST_F(OciStoreTest, IdsNeverEscapeTheRoot) {
  auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok());
  fs::create_directories(temp_ / "outside");
  for (const char* id : {"..", "../outside", "/tmp", "a/../../outside", "."}) {
    EXPECT_FALSE(store->create(id).ok()) << id;
    const auto opened = store->open(id, true);
    ASSERT_FALSE(opened.ok()) << id;
    EXPECT_NE(opened.error().message().find("does not exist"), std::string::npos);
  }
  // A symlink planted as a container directory is not followed.
  fs::create_symlink(temp_ / "outside", root_ / "planted");
  EXPECT_FALSE(store->open("planted", true).ok());
  EXPECT_TRUE(store->ids().empty());
  EXPECT_FALSE(fs::exists(temp_ / "outside" / "lock"));
}

TEST_F(OciStoreTest, RemoveKeepsFilesItDidNotWrite) {
  auto store = StateStore::open(root_);
  ASSERT_TRUE(store.ok());
  auto dir = store->create("c1");
  ASSERT_TRUE(dir.ok());
  testing::write_file(root_ / "c1" / "stranger", "x");
  const auto status = dir->remove();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("stranger"), std::string::npos);
  EXPECT_TRUE(fs::exists(root_ / "c1" / "stranger"));
}

}  // namespace
}  // namespace pulsebox::oci
