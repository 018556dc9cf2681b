#include "oci/launch/spawn.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "core/trace.h"
#include "linux/clone.h"
#include "linux/syscalls.h"
#include "linux/userns.h"
#include "oci/launch/container_init.h"
#include "runtime/sync_channel.h"

namespace pulsebox::oci::launch {
namespace {

constexpr const char* kComponent = "oci launch";
// The child runs on a copy of this stack (fork semantics): deep enough for
// the path buffers of linux/rooted_mounts.cc.
constexpr std::size_t kChildStackBytes = 256 * 1024;
constexpr std::uint64_t kCloneNamespaces = CLONE_NEWUSER | CLONE_NEWPID;

struct ChildStart {
  const ContainerPlan* plan;
  int channel;
};

PULSEBOX_CHILD_CODE int start_child(void* argument) {
  const auto* start = static_cast<const ChildStart*>(argument);
  run_container_init(*start->plan, start->channel);
}

core::Status check_plan(const ContainerPlan& plan) {
  const auto invalid = [](std::string message) {
    return core::Error(core::ErrorKind::kInvalidInput, kComponent, std::move(message));
  };
  if ((plan.clone_namespaces & ~kCloneNamespaces) != 0)
    return invalid("only the user and pid namespaces are made by clone3");
  if ((plan.unshare_namespaces & (kCloneNamespaces | CLONE_NEWCGROUP)) != 0)
    return invalid("the user, pid and cgroup namespaces are not unshared with the rest");
  if (plan.rootfs.empty() || plan.rootfs.front() != '/')
    return invalid("the root path must be absolute: " + plan.rootfs);
  if (plan.exec_candidates.empty() || plan.args.empty()) return invalid("no program to execute");
  if (plan.argv.size() != plan.args.size() + 1 || plan.envp.size() != plan.env.size() + 1)
    return invalid("the plan was not sealed");
  if ((plan.exec_fifo_fd >= 0) != (plan.exec_fifo_writer_fd >= 0))
    return invalid("the exec fifo needs both its read end and a write end");
  if (plan.seccomp_program.size() > 0xffff) return invalid("the seccomp program is too long");
  const int first_free = 3 + plan.preserved_fds;
  int attached = 0;
  for (const auto& step : plan.mounts) {
    if (step.op != linux_api::MountOp::AttachFd) continue;
    if (++attached > kMaxAttachFds) return invalid("too many detached mount trees to attach");
    if (step.fd < first_free)
      return invalid("a mount tree's descriptor " + std::to_string(step.fd) +
                     " is inside the preserved range");
  }
  for (const int fd :
       {plan.exec_fifo_fd, plan.exec_fifo_writer_fd, plan.cgroup_fd, plan.console_socket_fd}) {
    if (fd >= 0 && fd < first_free)
      return invalid("descriptor " + std::to_string(fd) + " is inside the preserved range");
  }
  return core::ok_status();
}

}  // namespace

core::Result<ContainerProcess> spawn_container(const ContainerPlan& plan) {
  PB_CHECK(check_plan(plan));
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return core::Error::from_errno(kComponent, "socketpair for the container's channel");
  core::UniqueFd parent_end(pair[0]);
  core::UniqueFd child_end(pair[1]);
  if (child_end.get() < 3 + plan.preserved_fds) {
    // The child keeps its end through the setup: above the preserved range.
    const int moved = ::fcntl(child_end.get(), F_DUPFD_CLOEXEC, 3 + plan.preserved_fds);
    if (moved < 0) return core::Error::from_errno(kComponent, "moving the container's channel");
    child_end = core::UniqueFd(moved);
  }
  PB_TRY(stack, linux_api::ChildStack::allocate(kChildStackBytes));

  ChildStart start{&plan, child_end.get()};
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_PIDFD | plan.clone_namespaces;
  if (plan.cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(plan.cgroup_fd);
  }
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uint64_t>(stack.base());
  args.stack_size = stack.size();
  const long pid = linux_api::clone3_on_stack(&args, start_child, &start);
  if (pid < 0) {
    return core::Error::from_errno(kComponent, "clone3 of the container's process",
                                   static_cast<int>(-pid));
  }
  ContainerProcess process(static_cast<pid_t>(pid), core::UniqueFd(pidfd), std::move(parent_end));
  child_end.reset();
  core::trace_phase("oci: cloned");  // a crash point of create (design §5)
  if ((plan.clone_namespaces & CLONE_NEWUSER) != 0) {
    if (auto written = linux_api::write_id_maps(static_cast<pid_t>(pid), plan.id_maps);
        !written.ok()) {
      (void)process.kill();
      siginfo_t info{};
      ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(process.pidfd()), &info, WEXITED);
      return std::move(written).error().with_context("writing the container's id maps");
    }
  }
  return process;
}

core::Status ContainerProcess::go() {
  if (!runtime::send_go(channel_.get()))
    return core::Error::from_errno(kComponent, "sending Go to the container's process");
  return core::ok_status();
}

core::Status ContainerProcess::expect(runtime::ChildMessageKind kind, const char* waiting_for,
                                      int timeout_ms) {
  const auto message = runtime::receive_message(channel_.get(), timeout_ms, nullptr);
  if (!message) {
    return core::Error(
        core::ErrorKind::kIo, kComponent,
        std::string("the container's process ended or did not answer while ") + waiting_for);
  }
  if (message->kind == runtime::ChildMessageKind::Error) {
    // The child's own words, as data: stage() is its stage, the message
    // "stage detail" (what to_string prints), error_number() its errno.
    std::string text = message->stage;
    if (message->detail[0] != '\0') text += std::string(" ") + message->detail;
    return core::Error(core::ErrorKind::kIo, message->stage, std::move(text),
                       message->error_number);
  }
  if (message->kind != kind) {
    return core::Error(
        core::ErrorKind::kInternal, kComponent,
        std::string("unexpected message from the container's process while ") + waiting_for);
  }
  return core::ok_status();
}

core::Status ContainerProcess::wait_ready(int timeout_ms) {
  return expect(runtime::ChildMessageKind::Ready, "it was being set up", timeout_ms);
}

core::Status ContainerProcess::detach(int timeout_ms) {
  if (!runtime::send_detach(channel_.get()))
    return core::Error::from_errno(kComponent, "sending Detach to the container's process");
  return expect(runtime::ChildMessageKind::Detached, "detaching", timeout_ms);
}

core::Status ContainerProcess::kill() {
  if (linux_api::sys_pidfd_send_signal(pidfd_.get(), SIGKILL) != 0 && errno != ESRCH)
    return core::Error::from_errno(kComponent, "killing the container's process");
  return core::ok_status();
}

}  // namespace pulsebox::oci::launch
