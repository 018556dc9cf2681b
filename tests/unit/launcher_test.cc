// The launcher's order of steps and its failure paths, as data: a recording
// LaunchSyscalls (tests/helpers/recording_launch_syscalls.h) stands in for
// the kernel, so nothing is cloned, signalled or reaped and no privilege is
// needed. The real launch runs in tests/integration.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "helpers/recording_launch_syscalls.h"
#include "runtime/launcher.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {
namespace {

using Steps = std::vector<std::string>;
using testing::RecordingLaunchSyscalls;

constexpr std::uint64_t kAllNamespaces =
    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto stack = linux_api::ChildStack::allocate(LaunchPlan::kCommandStackSize);
    ASSERT_TRUE(stack.ok()) << stack.error().to_string();
    plan_.command_stack = std::move(stack).value();
    plan_.namespaces = kAllNamespaces;
    plan_.id_maps.uids = {{0, 100000, 65536}};
    plan_.id_maps.gids = {{0, 200000, 65536}};
    plan_.id_maps.deny_setgroups = false;
  }

  // The supervisor's end of the channel: a descriptor of the test's own.
  core::UniqueFd supervisor_end() {
    core::UniqueFd fd(::eventfd(0, EFD_CLOEXEC));
    channel_ = fd.get();
    return fd;
  }

  core::Result<LaunchedSandbox> launch() {
    return launch_sandbox(plan_, supervisor_end(), fake_.before_go(), fake_);
  }

  // The fake comes first: it outlives every sandbox a test launches.
  RecordingLaunchSyscalls fake_;
  LaunchPlan plan_;
  int channel_ = -1;
};

TEST_F(LauncherTest, InitIsBornInItsCgroupThenMapsThenBeforeGoThenGo) {
  plan_.cgroup_fd = 7;
  auto launched = launch();
  ASSERT_TRUE(launched.ok()) << launched.error().to_string();
  EXPECT_EQ(fake_.steps(), (Steps{"clone3", "write_id_maps", "before_go", "send_go"}));

  const auto clone3 = fake_.first("clone3");
  EXPECT_TRUE(clone3.flags & CLONE_INTO_CGROUP);
  EXPECT_EQ(clone3.cgroup, 7u);
  // Only the user and pid namespaces at birth: init makes the others itself.
  EXPECT_EQ(clone3.flags & kAllNamespaces, std::uint64_t{CLONE_NEWUSER | CLONE_NEWPID});
  for (const std::uint64_t flag : {CLONE_PIDFD, CLONE_PARENT_SETTID, CLONE_VM, CLONE_VFORK}) {
    EXPECT_TRUE(clone3.flags & flag) << std::hex << flag;
  }
  EXPECT_EQ(clone3.exit_signal, std::uint64_t{SIGCHLD});
  EXPECT_TRUE(clone3.has_stack);

  const auto maps = fake_.first("write_id_maps");
  EXPECT_EQ(maps.pid, fake_.init_pid);
  ASSERT_EQ(maps.id_maps.uids.size(), 1u);
  EXPECT_EQ(maps.id_maps.uids[0].outside, 100000u);
  ASSERT_EQ(maps.id_maps.gids.size(), 1u);
  EXPECT_EQ(maps.id_maps.gids[0].outside, 200000u);
  EXPECT_FALSE(maps.id_maps.deny_setgroups);

  const auto before_go = fake_.first("before_go");
  EXPECT_EQ(before_go.pid, fake_.init_pid);
  EXPECT_TRUE(before_go.in_cgroup) << "clone3 placed it: before_go must not attach it again";
  EXPECT_EQ(fake_.first("send_go").fd, channel_);
  EXPECT_EQ(fake_.first("send_go").passed_fds, std::vector<int>{}) << "no v1 cgroup to join";

  const LaunchedSandbox& sandbox = launched.value();
  EXPECT_EQ(sandbox.pid, fake_.init_pid);
  EXPECT_TRUE(sandbox.pidfd.valid());
  EXPECT_EQ(sandbox.channel.get(), channel_);
}

// init shares this process's memory (CLONE_VM) until it has reset every
// handler: a signal it took before then (Ctrl-C reaches the whole process
// group) would run pulsebox's handler there, such as `pulsebox run`'s
// cancel-on-signal, whose "second signal" flag would then end pulsebox at
// the user's first Ctrl-C without cancelling. So it is cloned with every
// signal blocked, and unblocks them once their handlers are the defaults.
TEST_F(LauncherTest, InitIsClonedWithEverySignalBlocked) {
  auto launched = launch();
  ASSERT_TRUE(launched.ok()) << launched.error().to_string();
  EXPECT_EQ(fake_.first("clone3").unblocked, std::vector<int>{});
}

TEST_F(LauncherTest, WithoutClone3InitIsClonedWithEverySignalBlockedToo) {
  fake_.fail("clone3", ENOSYS);
  auto launched = launch();
  ASSERT_TRUE(launched.ok()) << launched.error().to_string();
  EXPECT_EQ(fake_.first("clone").unblocked, std::vector<int>{});
}

// The v1 cgroups are made after the clone, while init makes its namespaces
// (before_go): init gets their `tasks` files with Go, not through the
// descriptors it was cloned with.
TEST_F(LauncherTest, GoCarriesTheTaskFilesBeforeGoOpened) {
  const BeforeGo recorded = fake_.before_go();
  auto launched = launch_sandbox(
      plan_, supervisor_end(),
      [&](pid_t pid, bool in_cgroup) -> core::Status {
        PB_CHECK(recorded(pid, in_cgroup));
        plan_.cgroup_task_fds[0] = 11;
        plan_.cgroup_task_fds[1] = 12;
        plan_.cgroup_task_fd_count = 2;
        return core::ok_status();
      },
      fake_);
  ASSERT_TRUE(launched.ok()) << launched.error().to_string();
  EXPECT_EQ(fake_.steps(), (Steps{"clone3", "write_id_maps", "before_go", "send_go"}));
  EXPECT_EQ(fake_.first("send_go").passed_fds, (std::vector<int>{11, 12}));
}

TEST_F(LauncherTest, WithoutACgroupInitIsNotClonedIntoOne) {
  auto launched = launch();
  ASSERT_TRUE(launched.ok()) << launched.error().to_string();
  EXPECT_EQ(fake_.steps(), (Steps{"clone3", "write_id_maps", "before_go", "send_go"}));
  EXPECT_FALSE(fake_.first("clone3").flags & CLONE_INTO_CGROUP);
  EXPECT_FALSE(fake_.first("before_go").in_cgroup);
}

// clone3 missing (an old kernel, or a container's seccomp profile): clone()
// starts init outside its cgroup, and before_go is told so.
class LauncherFallbackTest : public LauncherTest, public ::testing::WithParamInterface<int> {};

TEST_P(LauncherFallbackTest, WithoutClone3InitIsClonedAndFoundByItsPidfd) {
  plan_.cgroup_fd = 7;
  fake_.fail("clone3", GetParam());
  auto launched = launch();
  ASSERT_TRUE(launched.ok()) << launched.error().to_string();
  EXPECT_EQ(fake_.steps(),
            (Steps{"clone3", "clone", "pid_of_pidfd", "write_id_maps", "before_go", "send_go"}));
  const auto clone = fake_.first("clone");
  EXPECT_EQ(clone.flags & kAllNamespaces, std::uint64_t{CLONE_NEWUSER | CLONE_NEWPID});
  for (const std::uint64_t flag : {CLONE_PIDFD, CLONE_VM, CLONE_VFORK}) {
    EXPECT_TRUE(clone.flags & flag) << std::hex << flag;
  }
  EXPECT_FALSE(clone.flags & CLONE_INTO_CGROUP);
  EXPECT_EQ(clone.flags & 0xff, std::uint64_t{SIGCHLD});
  EXPECT_TRUE(clone.has_stack);
  EXPECT_EQ(fake_.first("pid_of_pidfd").fd, launched->pidfd.get());
  EXPECT_FALSE(fake_.first("before_go").in_cgroup) << "before_go must attach it itself";
  EXPECT_EQ(launched->pid, fake_.init_pid);
}

INSTANTIATE_TEST_SUITE_P(Clone3Missing, LauncherFallbackTest, ::testing::Values(ENOSYS, E2BIG),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return param_info.param == ENOSYS ? "ENOSYS" : "E2BIG";
                         });

TEST_F(LauncherTest, Clone3RefusedForAnotherReasonIsNotRetried) {
  fake_.fail("clone3", EPERM);
  auto launched = launch();
  ASSERT_FALSE(launched.ok());
  EXPECT_EQ(fake_.steps(), (Steps{"clone3"})) << "nothing started: nothing to kill";
  EXPECT_EQ(launched.error().kind(), core::ErrorKind::kUnavailable);
  EXPECT_EQ(launched.error().error_number(), EPERM);
  EXPECT_EQ(launched.error().message(), "creating the sandbox's namespaces (clone3)");
}

TEST_F(LauncherTest, CloneRefusedToo) {
  fake_.fail("clone3", ENOSYS);
  fake_.fail("clone", EINVAL);
  auto launched = launch();
  ASSERT_FALSE(launched.ok());
  EXPECT_EQ(fake_.steps(), (Steps{"clone3", "clone"}));
  EXPECT_EQ(launched.error().error_number(), EINVAL);
  EXPECT_EQ(launched.error().message(), "creating the sandbox's namespaces (clone3)");
}

// Known only by its pidfd: killed and reaped through it, nothing sent.
TEST_F(LauncherTest, AnInitWhosePidIsNotFoundIsKilledThroughItsPidfd) {
  fake_.fail("clone3", ENOSYS);
  fake_.fail("pid_of_pidfd", ESRCH);
  auto launched = launch();
  ASSERT_FALSE(launched.ok());
  EXPECT_EQ(fake_.steps(), (Steps{"clone3", "clone", "pid_of_pidfd", "kill_and_reap_pidfd"}));
  EXPECT_EQ(fake_.first("kill_and_reap_pidfd").fd, fake_.first("pid_of_pidfd").fd);
  EXPECT_EQ(launched.error().kind(), core::ErrorKind::kUnavailable);
  EXPECT_EQ(launched.error().error_number(), ESRCH);
  EXPECT_EQ(launched.error().message(), "finding the sandbox's init (pidfd)");
}

// A step that fails once init exists: init is killed and reaped, the
// step's error comes back with its context, and nothing follows.
struct FailedStep {
  std::string step;
  Steps expected;
  std::string context;  // the launcher's, outermost ("" for none)
};

class LauncherFailureTest : public LauncherTest,
                            public ::testing::WithParamInterface<FailedStep> {};

TEST_P(LauncherFailureTest, InitIsKilledAndReapedAndNothingFollows) {
  const FailedStep& failed = GetParam();
  plan_.cgroup_fd = 7;
  fake_.fail(failed.step, EACCES);
  auto launched = launch();
  ASSERT_FALSE(launched.ok()) << failed.step;
  EXPECT_EQ(fake_.steps(), failed.expected);
  EXPECT_EQ(fake_.first("kill_init").pid, fake_.init_pid);
  EXPECT_EQ(fake_.first("reap_init").pid, fake_.init_pid);

  const core::Error& error = launched.error();
  EXPECT_EQ(error.error_number(), EACCES);
  EXPECT_EQ(error.message(), failed.step) << "the step's own error";
  if (failed.context.empty()) {
    EXPECT_TRUE(error.context().empty()) << error.to_string();
  } else {
    ASSERT_FALSE(error.context().empty()) << error.to_string();
    EXPECT_EQ(error.context().back(), failed.context);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EachStep, LauncherFailureTest,
    ::testing::Values(FailedStep{"write_id_maps",
                                 {"clone3", "write_id_maps", "kill_init", "reap_init"},
                                 "writing the sandbox's id maps"},
                      FailedStep{"before_go",
                                 {"clone3", "write_id_maps", "before_go", "kill_init", "reap_init"},
                                 "placing the sandbox in its cgroups"},
                      FailedStep{"send_go",
                                 {"clone3", "write_id_maps", "before_go", "send_go", "kill_init",
                                  "reap_init"},
                                 ""}),
    [](const ::testing::TestParamInfo<FailedStep>& param_info) { return param_info.param.step; });

TEST_F(LauncherTest, AFailureAfterTheFallbackKillsAndReapsToo) {
  fake_.fail("clone3", ENOSYS);
  fake_.fail("write_id_maps", EPERM);
  auto launched = launch();
  ASSERT_FALSE(launched.ok());
  EXPECT_EQ(fake_.steps(),
            (Steps{"clone3", "clone", "pid_of_pidfd", "write_id_maps", "kill_init", "reap_init"}));
}

TEST_F(LauncherTest, APlanWithoutACommandStackStartsNothing) {
  plan_.command_stack = linux_api::ChildStack();
  auto launched = launch();
  ASSERT_FALSE(launched.ok());
  EXPECT_EQ(launched.error().kind(), core::ErrorKind::kInternal);
  EXPECT_TRUE(fake_.steps().empty());
}

// The supervisor's wait() reaps without killing; init's parent thread,
// which stays in clone3 until init is reaped, is joined after the reap.
TEST_F(LauncherTest, WaitReapsWithoutKillingAndOnlyOnce) {
  fake_.wait_status = 0x0100;  // exit(1)
  {
    auto launched = launch();
    ASSERT_TRUE(launched.ok()) << launched.error().to_string();
    LaunchedSandbox sandbox = std::move(launched).value();
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(sandbox.wait(), 0x0100);
    EXPECT_LT(std::chrono::steady_clock::now() - start, fake_.reap_patience)
        << "init's parent thread was joined before init was reaped";
    EXPECT_EQ(sandbox.wait(), 0) << "reaped once";
  }
  EXPECT_EQ(fake_.steps(), (Steps{"clone3", "write_id_maps", "before_go", "send_go", "reap_init"}));
}

// A LaunchedSandbox dropped before wait() (an error on the way to Start)
// kills and reaps its init: the stack init runs on is unmapped after it.
TEST_F(LauncherTest, DroppingALaunchedSandboxKillsAndReapsInit) {
  {
    auto launched = launch();
    ASSERT_TRUE(launched.ok()) << launched.error().to_string();
    LaunchedSandbox moved = std::move(launched).value();
    LaunchedSandbox holder;
    holder = std::move(moved);
  }
  EXPECT_EQ(fake_.steps(),
            (Steps{"clone3", "write_id_maps", "before_go", "send_go", "kill_init", "reap_init"}));
}

// Whether [address, address + bytes) is mapped in this process.
bool mapped(const void* address, std::size_t bytes) {
  return ::msync(const_cast<void*>(address), bytes, MS_ASYNC) == 0 || errno != ENOMEM;
}

// The permissions /proc/self/maps shows for the mapping that holds `address`.
std::string permissions_at(const void* address) {
  const auto wanted = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    const auto low = std::stoull(line.substr(0, dash), nullptr, 16);
    const auto high = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
    if (wanted >= low && wanted < high) return line.substr(space + 1, 4);
  }
  return "unmapped";
}

const std::size_t kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

// A pooled stack comes back, still mapped, with its guard page, for the
// next pooled stack of its size; other sizes and unpooled stacks never get it.
TEST(ChildStackTest, APooledStackIsKeptWithItsGuardForTheNextOfItsSize) {
  const std::size_t size = 13 * kPage;  // a size no other stack in this program has
  void* base = nullptr;
  {
    auto stack = linux_api::ChildStack::allocate(size, linux_api::StackReuse::kPooled);
    ASSERT_TRUE(stack.ok()) << stack.error().to_string();
    base = stack.value().base();
  }
  ASSERT_TRUE(mapped(base, size)) << "a pooled stack was unmapped";
  auto other_size = linux_api::ChildStack::allocate(12 * kPage, linux_api::StackReuse::kPooled);
  ASSERT_TRUE(other_size.ok());
  EXPECT_NE(other_size.value().base(), base);
  auto unpooled = linux_api::ChildStack::allocate(size);
  ASSERT_TRUE(unpooled.ok());
  EXPECT_NE(unpooled.value().base(), base);
  auto again = linux_api::ChildStack::allocate(size, linux_api::StackReuse::kPooled);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().base(), base);
  EXPECT_EQ(again.value().size(), size);
  EXPECT_EQ(permissions_at(static_cast<char*>(base) - kPage), "---p") << "the guard page is gone";
  EXPECT_EQ(permissions_at(base), "rw-p");
}

TEST(ChildStackTest, AnUnpooledStackIsUnmapped) {
  const std::size_t size = 14 * kPage;
  void* base = nullptr;
  {
    auto stack = linux_api::ChildStack::allocate(size);
    ASSERT_TRUE(stack.ok()) << stack.error().to_string();
    base = stack.value().base();
  }
  EXPECT_FALSE(mapped(base, size));
  EXPECT_FALSE(mapped(static_cast<char*>(base) - kPage, kPage)) << "its guard page stayed";
}

// The pool holds a few: of more pooled stacks ending at once, the rest are
// unmapped. In a child process, so that this process's pool stays as it was.
TEST(ChildStackTest, ThePoolIsBounded) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::size_t size = 15 * kPage;
    std::vector<void*> bases;
    {
      std::vector<linux_api::ChildStack> stacks;
      for (std::size_t i = 0; i <= linux_api::kMaxPooledStacks; ++i) {
        auto stack = linux_api::ChildStack::allocate(size, linux_api::StackReuse::kPooled);
        if (!stack.ok()) ::_exit(2);
        bases.push_back(stack.value().base());
        stacks.push_back(std::move(stack).value());
      }
    }
    std::size_t still_mapped = 0;
    for (void* base : bases)
      still_mapped += mapped(base, size) ? 1 : 0;
    ::_exit(still_mapped >= 1 && still_mapped <= linux_api::kMaxPooledStacks ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "status " << status << " (exit 1: more than the pool's bound stayed mapped, or none)";
}

// init's stack is pooled only when init is a new pid namespace's init: its
// reap then means every process that ran on the sandbox's stacks is gone.
TEST_F(LauncherTest, InitsStackIsPooledOnlyForANewPidNamespace) {
  for (const bool new_pid_namespace : {true, false}) {
    SCOPED_TRACE(new_pid_namespace ? "a new pid namespace" : "no pid namespace");
    RecordingLaunchSyscalls fake;
    plan_.namespaces = new_pid_namespace ? kAllNamespaces : (kAllNamespaces & ~CLONE_NEWPID);
    {
      auto launched = launch_sandbox(plan_, supervisor_end(), fake.before_go(), fake);
      ASSERT_TRUE(launched.ok()) << launched.error().to_string();
    }
    const auto calls = fake.calls();
    ASSERT_FALSE(calls.empty());
    ASSERT_EQ(calls.front().step, "clone3");
    const auto* stack = reinterpret_cast<const void*>(calls.front().stack);
    ASSERT_NE(stack, nullptr);
    EXPECT_EQ(mapped(stack, kPage), new_pid_namespace);
  }
}

// Go over a real channel: the descriptors it carries arrive in order, as
// the same open files, close-on-exec (init must not leave them to the
// command), and the slots past them say -1.
class GoMessageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
    supervisor_.reset(pair[0]);
    init_.reset(pair[1]);
  }
  static ino_t inode_of(int fd) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? st.st_ino : 0;
  }
  core::UniqueFd supervisor_, init_;
};

TEST_F(GoMessageTest, TheDescriptorsArriveInOrderAndCloseOnExec) {
  std::vector<core::UniqueFd> sent;
  std::vector<int> raw;
  for (int i = 0; i < kMaxGoFds; ++i) {
    sent.emplace_back(::eventfd(0, EFD_CLOEXEC));
    raw.push_back(sent.back().get());
  }
  ASSERT_TRUE(send_go(supervisor_.get(), raw.data(), static_cast<int>(raw.size())));
  int received[kMaxGoFds];
  ASSERT_TRUE(wait_for_go(init_.get(), received));
  for (int i = 0; i < kMaxGoFds; ++i) {
    SCOPED_TRACE(i);
    ASSERT_GE(received[i], 0);
    core::UniqueFd owned(received[i]);
    EXPECT_NE(received[i], raw[i]) << "a new descriptor of the same file";
    EXPECT_EQ(inode_of(received[i]), inode_of(raw[i]));
    EXPECT_TRUE(::fcntl(received[i], F_GETFD) & FD_CLOEXEC);
  }
}

TEST_F(GoMessageTest, FewerDescriptorsLeaveTheRestMinusOne) {
  core::UniqueFd one(::eventfd(0, EFD_CLOEXEC));
  const int raw[] = {one.get()};
  ASSERT_TRUE(send_go(supervisor_.get(), raw, 1));
  int received[kMaxGoFds];
  ASSERT_TRUE(wait_for_go(init_.get(), received));
  core::UniqueFd owned(received[0]);
  EXPECT_EQ(inode_of(received[0]), inode_of(one.get()));
  for (int i = 1; i < kMaxGoFds; ++i)
    EXPECT_EQ(received[i], -1) << i;
}

TEST_F(GoMessageTest, APlainGoCarriesNothingAndAnotherMessageIsNotGo) {
  ASSERT_TRUE(send_go(supervisor_.get()));
  int received[kMaxGoFds];
  ASSERT_TRUE(wait_for_go(init_.get(), received));
  for (const int fd : received)
    EXPECT_EQ(fd, -1);
  ASSERT_TRUE(send_start(supervisor_.get()));
  EXPECT_FALSE(wait_for_go(init_.get(), received));
  supervisor_.reset();
  EXPECT_FALSE(wait_for_go(init_.get(), received)) << "end of file: the supervisor is gone";
}

}  // namespace
}  // namespace pulsebox::runtime
