#include "oci/launch/spawn.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "core/trace.h"
#include "linux/clone.h"
#include "linux/syscalls.h"
#include "linux/userns.h"
#include "oci/launch/container_init.h"
#include "oci/launch/join.h"
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
  const bool exec = plan.join_pidfd >= 0;
  if (exec &&
      (!plan.mounts.empty() || !plan.join_namespaces.empty() || plan.exec_fifo_fd >= 0 ||
       plan.clone_namespaces != 0 || plan.unshare_namespaces != 0 || plan.new_cgroup_namespace))
    return invalid("exec's process joins a container and makes nothing");
  if (!exec && (plan.rootfs.empty() || plan.rootfs.front() != '/'))
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
  for (const int fd : {plan.exec_fifo_fd, plan.exec_fifo_writer_fd, plan.cgroup_fd,
                       plan.console_socket_fd, plan.join_pidfd}) {
    if (fd >= 0 && fd < first_free)
      return invalid("descriptor " + std::to_string(fd) + " is inside the preserved range");
  }
  int previous_rank = -1;
  for (const auto& ns : plan.join_namespaces) {
    const int rank = join_rank(ns.type);
    if (ns.fd < first_free)
      return invalid("a namespace to join has no descriptor above the preserved range");
    if (rank <= previous_rank) return invalid("the namespaces to join are out of order");
    previous_rank = rank;
    if (((plan.clone_namespaces | plan.unshare_namespaces) & static_cast<std::uint64_t>(ns.type)) !=
            0 ||
        (ns.type == CLONE_NEWCGROUP && plan.new_cgroup_namespace))
      return invalid("a namespace is both joined and made");
  }
  if (!plan.join_namespaces.empty() && (plan.clone_namespaces & CLONE_NEWUSER) != 0)
    return invalid("a new user namespace with namespaces to join is not supported yet");
  return core::ok_status();
}

PULSEBOX_CHILD_CODE int start_join_stage(void* argument) {
  run_join_stage(*static_cast<const JoinStart*>(argument));
}

// The join path: the first stage on `stack`, the container's process on a
// second one; the first stage's pid is never the container's.
core::Result<ContainerProcess> spawn_joined(const ContainerPlan& plan, core::UniqueFd parent_end,
                                            core::UniqueFd child_end,
                                            linux_api::ChildStack stage_stack) {
  PB_TRY(process_stack, linux_api::ChildStack::allocate(kChildStackBytes));
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return core::Error::from_errno(kComponent, "pipe for the container's pid");
  core::UniqueFd pid_read(pipe_fds[0]);
  core::UniqueFd pid_write(pipe_fds[1]);

  JoinStart start;
  start.plan = &plan;
  start.channel = child_end.get();
  start.pid_pipe = pid_write.get();
  start.stack_base = process_stack.base();
  start.stack_size = process_stack.size();
  int stage_pidfd = -1;
  clone_args args{};
  args.flags = CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uint64_t>(&stage_pidfd);
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uint64_t>(stage_stack.base());
  args.stack_size = stage_stack.size();
  const long stage = linux_api::clone3_on_stack(&args, start_join_stage, &start);
  if (stage < 0) {
    return core::Error::from_errno(kComponent, "clone3 of the namespace-joining stage",
                                   static_cast<int>(-stage));
  }
  core::UniqueFd stage_fd(stage_pidfd);
  pid_write.reset();
  child_end.reset();
  siginfo_t info{};
  while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(stage_fd.get()), &info,
                  WEXITED) != 0 &&
         errno == EINTR) {
  }
  int pid = 0;
  const ssize_t n = ::read(pid_read.get(), &pid, sizeof pid);
  if (info.si_code != CLD_EXITED || info.si_status != 0 || n != static_cast<ssize_t>(sizeof pid)) {
    // The stage's own words when it sent them.
    const auto message = runtime::receive_message(parent_end.get(), 0, nullptr);
    if (message && message->kind == runtime::ChildMessageKind::Error) {
      std::string text = message->stage;
      if (message->detail[0] != '\0') text += std::string(" ") + message->detail;
      return core::Error(core::ErrorKind::kIo, message->stage, std::move(text),
                         message->error_number);
    }
    return core::Error(core::ErrorKind::kIo, kComponent,
                       "the namespace-joining stage ended without the container's pid");
  }
  // The process is this one's child (CLONE_PARENT) and not reaped: its pid
  // cannot name another process yet.
  core::UniqueFd pidfd(linux_api::sys_pidfd_open(pid));
  if (!pidfd) {
    const int saved = errno;
    ::kill(pid, SIGKILL);
    return core::Error::from_errno(kComponent, "pidfd_open of the container's process", saved);
  }
  // The same crash point of create as the fast path's (exec has its own).
  if (plan.join_pidfd < 0) core::trace_phase("oci: cloned");
  return ContainerProcess(pid, std::move(pidfd), std::move(parent_end));
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

  if (!plan.join_namespaces.empty() || plan.join_pidfd >= 0)
    return spawn_joined(plan, std::move(parent_end), std::move(child_end), std::move(stack));

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

namespace {

// The child's own words, as data: stage() is its stage, the message
// "stage detail" (what to_string prints), error_number() its errno.
core::Error child_error(const runtime::ChildMessage& message) {
  std::string text = message.stage;
  if (message.detail[0] != '\0') text += std::string(" ") + message.detail;
  return core::Error(core::ErrorKind::kIo, message.stage, std::move(text), message.error_number);
}

}  // namespace

core::Status ContainerProcess::expect(runtime::ChildMessageKind kind, const char* waiting_for,
                                      int timeout_ms) {
  const auto message = runtime::receive_message(channel_.get(), timeout_ms, nullptr);
  if (!message) {
    return core::Error(
        core::ErrorKind::kIo, kComponent,
        std::string("the container's process ended or did not answer while ") + waiting_for);
  }
  if (message->kind == runtime::ChildMessageKind::Error) return child_error(*message);
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

core::Status ContainerProcess::wait_exec(int timeout_ms) {
  pollfd waiting{channel_.get(), POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&waiting, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return core::Error::from_errno(kComponent, "waiting for the program to start");
  if (ready == 0) {
    return core::Error(core::ErrorKind::kIo, kComponent,
                       "the container's process did not start its program in time");
  }
  // Readable: a failed execve's report, or end-of-file once execve closed
  // the process's (CLOEXEC) end.
  const auto message = runtime::receive_message(channel_.get(), 0, nullptr);
  if (!message) return core::ok_status();
  if (message->kind == runtime::ChildMessageKind::Error) return child_error(*message);
  return core::Error(core::ErrorKind::kInternal, kComponent,
                     "unexpected message from the container's process before its program");
}

core::Status ContainerProcess::kill() {
  if (linux_api::sys_pidfd_send_signal(pidfd_.get(), SIGKILL) != 0 && errno != ESRCH)
    return core::Error::from_errno(kComponent, "killing the container's process");
  return core::ok_status();
}

}  // namespace pulsebox::oci::launch
