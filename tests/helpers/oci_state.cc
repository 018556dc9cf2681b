#include "helpers/oci_state.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "oci/process_ref.h"

extern char** environ;

namespace pulsebox::testing {

SleepChild::SleepChild() {
  char sleep_name[] = "sleep";
  char seconds[] = "60";
  char* argv[] = {sleep_name, seconds, nullptr};
  if (::posix_spawnp(&pid_, "sleep", nullptr, nullptr, argv, environ) != 0) pid_ = -1;
}

SleepChild::~SleepChild() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool SleepChild::alive() const {
  if (pid_ <= 0 || reaped_) return false;
  const auto stat = oci::read_process_stat(pid_);
  return stat && stat->state != 'Z' && stat->state != 'X';
}

int SleepChild::wait_for_signal() {
  for (int attempt = 0; attempt < 500; ++attempt) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

void write_oci_record(const std::filesystem::path& root, const std::string& id, pid_t pid,
                      std::uint64_t start_time, bool with_fifo,
                      const std::vector<std::string>& cgroup_leaves, core::UniqueFd* fifo_reader) {
  auto store = oci::StateStore::open(root);
  ASSERT_TRUE(store.ok()) << store.error().to_string();
  auto dir = store->create(id);
  ASSERT_TRUE(dir.ok()) << dir.error().to_string();
  oci::ContainerRecord record;
  record.id = id;
  record.bundle = "/bundles/" + id;
  record.rootfs = "/bundles/" + id + "/rootfs";
  record.created = oci::rfc3339_now();
  record.phase = oci::ContainerRecord::Phase::Created;
  record.process = {pid, start_time};
  record.cgroup_leaves = cgroup_leaves;
  record.enforced = "test";
  ASSERT_TRUE(dir->write_record(record).ok());
  if (with_fifo) {
    ASSERT_EQ(::mkfifoat(dir->fd(), "exec.fifo", 0600), 0);
    // The container's process holds the read end while it waits for start:
    // this test process plays it, until it exits (the descriptor is kept).
    const int reader = ::openat(dir->fd(), "exec.fifo", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(reader, 0);
    if (fifo_reader) *fifo_reader = core::UniqueFd(reader);
  }
}

CliRun run_oci(const std::filesystem::path& root, const std::vector<std::string>& args,
               const std::vector<std::string>& extra_env) {
  std::vector<std::string> full = {"oci", "--root", root.string()};
  full.insert(full.end(), args.begin(), args.end());
  return run_cli(full, "", extra_env);
}

}  // namespace pulsebox::testing
