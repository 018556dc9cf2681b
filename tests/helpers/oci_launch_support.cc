#include "helpers/oci_launch_support.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "helpers/test_support.h"
#include "linux/caps.h"
#include "oci/launch/spawn.h"

namespace pulsebox::testing {
namespace {

namespace fs = std::filesystem;
using linux_api::MountOp;
using linux_api::MountStep;

constexpr int kHandshakeMs = 20000;

MountStep step(MountOp op, std::string target, std::string stage) {
  MountStep result;
  result.op = op;
  result.target = std::move(target);
  result.stage = std::move(stage);
  return result;
}

// Everything readable on `fd` until end-of-file or `timeout_ms` of silence.
std::string read_until_eof(int fd, int timeout_ms) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd readable{fd, POLLIN, 0};
    if (::poll(&readable, 1, 200) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

std::string oci_launch_unavailable() {
  if (::access(kBusybox, X_OK) != 0)
    return "no static /bin/busybox (apt-get install busybox-static)";
  return "";
}

void make_busybox_root(const fs::path& root) {
  fs::create_directories(root / "bin");
  fs::copy_file(kBusybox, root / "bin" / "busybox", fs::copy_options::overwrite_existing);
  for (const char* applet : {"sh", "cat", "echo", "grep", "hostname", "id", "ls", "pwd", "touch",
                             "readlink", "test", "mkdir", "head", "wc", "mount", "stat", "sleep"}) {
    fs::create_symlink("busybox", root / "bin" / applet);
  }
  for (const char* dir : {"proc", "dev", "tmp"})
    fs::create_directories(root / dir);
}

oci::launch::ContainerPlan busybox_plan(const fs::path& root, const std::string& script) {
  oci::launch::ContainerPlan plan;
  plan.rootfs = root.string();
  plan.clone_namespaces = CLONE_NEWPID;
  plan.unshare_namespaces = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET;
  if (::geteuid() != 0) {
    // An ordinary user maps only itself, as root inside, with setgroups
    // denied (the kernel requires it).
    plan.clone_namespaces |= CLONE_NEWUSER;
    plan.id_maps.uids = {{0, ::getuid(), 1}};
    plan.id_maps.gids = {{0, ::getgid(), 1}};
    plan.id_maps.deny_setgroups = true;
    plan.set_groups = false;
  }
  plan.mounts.push_back(step(MountOp::Proc, "/proc", "mounting /proc"));
  MountStep dev = step(MountOp::Tmpfs, "/dev", "mounting a tmpfs on /dev");
  dev.flags = MS_NOSUID | MS_NOEXEC;
  dev.data = "mode=755,size=1m";
  plan.mounts.push_back(dev);
  MountStep null = step(MountOp::Bind, "/dev/null", "binding /dev/null");
  null.source = "/dev/null";
  null.recursive = false;
  plan.mounts.push_back(null);
  plan.last_capability = linux_api::prepare_capability_drop().last_capability;
  plan.args = {"/bin/sh", "-c", script};
  plan.env = {"PATH=/bin", "HOME=/"};
  plan.exec_candidates = {"/bin/sh"};
  plan.seal();
  return plan;
}

void add_devpts(oci::launch::ContainerPlan& plan) {
  MountStep pts = step(MountOp::Devpts, "/dev/pts", "mounting devpts");
  pts.data = "newinstance,ptmxmode=0666,mode=0620";
  plan.mounts.push_back(pts);
  MountStep ptmx = step(MountOp::Symlink, "/dev/ptmx", "linking /dev/ptmx");
  ptmx.source = "pts/ptmx";
  plan.mounts.push_back(ptmx);
}

// The master and its name from the console socket, or -1.
int receive_master(int socket, std::string& name) {
  pollfd readable{socket, POLLIN, 0};
  if (::poll(&readable, 1, kHandshakeMs) <= 0) return -1;
  char payload[256] = {};
  iovec data{payload, sizeof payload - 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  header.msg_control = control;
  header.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  const cmsghdr* item = CMSG_FIRSTHDR(&header);
  if (n <= 0 || item == nullptr || item->cmsg_type != SCM_RIGHTS) return -1;
  name.assign(payload, static_cast<std::size_t>(n));
  int master = -1;
  std::memcpy(&master, CMSG_DATA(item), sizeof master);
  return master;
}

OciLaunch launch_busybox(oci::launch::ContainerPlan plan, bool console) {
  plan.seal();  // this copy's argv points into this copy's strings
  OciLaunch result;
  TempDir state;
  const fs::path fifo = state / "exec.fifo";
  if (::mkfifo(fifo.c_str(), 0600) != 0) {
    result.setup_error = "mkfifo failed";
    return result;
  }
  // The fds the plan names stay open here until spawn has cloned.
  const int fifo_read = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  const int fifo_write = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int output[2];
  if (fifo_read < 0 || fifo_write < 0 || null < 0 || ::pipe2(output, O_CLOEXEC) != 0) {
    result.setup_error = "opening the fifo, /dev/null or a pipe failed";
    return result;
  }
  plan.exec_fifo_fd = fifo_read;
  plan.exec_fifo_writer_fd = fifo_write;
  plan.stdio[0] = null;
  plan.stdio[1] = output[1];
  plan.stdio[2] = output[1];
  int console_pair[2] = {-1, -1};
  if (console && ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, console_pair) != 0) {
    result.setup_error = "socketpair for the console failed";
    return result;
  }
  plan.console_socket_fd = console_pair[1];
  auto spawned = oci::launch::spawn_container(plan);
  for (const int fd : {fifo_read, fifo_write, null, output[1], console_pair[1]})
    if (fd >= 0) ::close(fd);
  // With a console, the output is read from its master.
  int read_from = output[0];
  int master = -1;
  if (!spawned.ok()) {
    ::close(output[0]);
    result.setup_error = spawned.error().to_string();
    return result;
  }
  auto& process = spawned.value();
  core::Status status = process.go();
  if (status.ok()) status = process.wait_ready(kHandshakeMs);
  if (status.ok()) status = process.detach(kHandshakeMs);
  if (!status.ok()) {
    result.setup_stage = status.error().stage();
    result.setup_errno = status.error().error_number();
    result.setup_error = status.error().to_string();
    (void)process.kill();
  } else if (console && (master = receive_master(console_pair[0], result.console_name)) < 0) {
    result.setup_error = "no pseudo-terminal master came on the console socket";
    (void)process.kill();
  } else {
    if (master >= 0) read_from = master;
    // Set up and detached: nothing may run before `start` writes the fifo.
    pollfd readable{read_from, POLLIN, 0};
    if (::poll(&readable, 1, 300) > 0) result.before_start = read_until_eof(read_from, 1000);
    const int start = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (start < 0 || ::write(start, "0", 1) != 1) result.setup_error = "writing the fifo failed";
    if (start >= 0) ::close(start);
    result.output = read_until_eof(read_from, kHandshakeMs);
  }
  ::close(output[0]);
  if (master >= 0) ::close(master);
  if (console_pair[0] >= 0) ::close(console_pair[0]);
  siginfo_t info{};
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(process.pidfd()), &info,
               WEXITED) == 0) {
    // As wait(2) would say it: an exit code in the high byte, a signal low.
    result.wait_status = info.si_code == CLD_EXITED ? info.si_status << 8 : info.si_status;
  }
  return result;
}

}  // namespace pulsebox::testing
