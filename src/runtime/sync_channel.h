// The channel between the supervisor and the sandbox's init process: a
// SOCK_SEQPACKET | SOCK_CLOEXEC socket pair carrying fixed-size messages.
//
//   supervisor -> init   Go        the id maps and the base mount steps are
//                                  written: join the v1 cgroups whose `tasks`
//                                  files it carries (SCM_RIGHTS), make the
//                                  base mounts (LaunchPlan::base_mounts)
//   supervisor -> init   PlanReady the rest of the plan is written: finish
//                                  the setup and start the command; carries
//                                  the idmapped workspace and home trees
//                                  (SCM_RIGHTS) when there are any
//   supervisor -> init   Start     the run's last checks are done: start the
//                                  command (init waits for it with the
//                                  sandbox set up, after pivot_root)
//   init/child -> sup.   Error     a setup step failed: {stage, errno, detail}
//   command -> sup.      Ready     about to execve; carries the seccomp
//                                  listener (SCM_RIGHTS) when there is one
//   init -> supervisor   Changes   the run's tmpfs for its changes (--disk), a
//                                  directory (SCM_RIGHTS), before the command
//                                  starts
//   init -> supervisor   Network   the sandbox's network namespace, as
//                                  sockets made inside it (SCM_RIGHTS) after
//                                  lo is up: the proxy's listener on
//                                  127.0.0.1, or a NETLINK_ROUTE and a
//                                  NETLINK_NETFILTER socket the supervisor
//                                  configures the namespace through
//                                  (LaunchPlan::network_handover)
//   init -> supervisor   Exited    the command ended (its wait status) and
//                                  every other process of the sandbox is
//                                  killed and reaped: only init is left
//
// The command inherits the child's end with CLOEXEC, so it closes at execve:
// the supervisor never waits for an "exec happened" message. Messages stay
// readable after the sender has exited, so the supervisor reads them after
// the sandbox is gone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pulsebox::runtime {

enum class ChildMessageKind : std::uint32_t {
  Go = 1,
  Error = 2,
  Exited = 3,
  Ready = 4,
  PlanReady = 5,
  Start = 6,
  Changes = 7,
  Terminal = 8,
  Network = 9,
  Detach = 10,    // OCI create -> container: the parent is about to exit
  Detached = 11,  // container -> create: the parent-death signal is cleared
};

// The most descriptors one message carries (PlanReady: the idmapped
// workspace and home, the command's stdin).
inline constexpr int kMaxPassedFds = 3;
// The most Go carries (the v1 cgroups' `tasks` files).
inline constexpr int kMaxGoFds = 4;

// The stage of an Error from the command's execve (every candidate
// failed); its detail is the program.
inline constexpr const char* kExecutingStage = "executing";

struct ChildMessage {
  ChildMessageKind kind = ChildMessageKind::Go;
  std::int32_t error_number = 0;
  std::int32_t wait_status = 0;
  char stage[128] = {};
  char detail[128] = {};
};

// Child side: no allocation, only write(2). Failures to send are ignored
// (the supervisor then sees the child exit without a message).
void send_child_error(int fd, const char* stage, const char* detail, int error_number) noexcept;
// The Error message send_child_error() sends (texts cut to fit).
ChildMessage child_error(const char* stage, const char* detail, int error_number) noexcept;
void send_child_exited(int fd, int wait_status) noexcept;
// Ready, passing `passed_fd` along when it is >= 0. Returns 0 or the errno.
int send_child_ready(int fd, int passed_fd) noexcept;
// Changes, passing `directory`. Returns 0 or the errno.
int send_child_changes(int fd, int directory) noexcept;
// Terminal, passing the command's pseudo-terminal master. Returns 0 or the
// errno.
int send_child_terminal(int fd, int master) noexcept;
// Network, passing fds[0..count). Returns 0 or the errno.
int send_child_network(int fd, const int* fds, int count) noexcept;
// Blocks for the Go message; false on EOF (the supervisor is gone).
bool wait_for_go(int fd) noexcept;
// The same, the descriptors sent with it landing in passed[0..kMaxGoFds)
// (CLOEXEC, in the order sent; the rest -1; more are closed unread).
bool wait_for_go(int fd, int* passed) noexcept;
// Blocks for PlanReady; the descriptors sent with it land in
// passed[0..kMaxPassedFds), in the order sent (the rest -1). False on EOF or
// another message.
bool wait_for_plan_ready(int fd, int* passed) noexcept;
// Blocks for Start; false on EOF or another message.
bool wait_for_start(int fd) noexcept;
// The OCI container's end of create (oci/launch/spawn.h): blocks for
// Detach (false on EOF), and acknowledges it.
bool wait_for_detach(int fd) noexcept;
void send_child_detached(int fd) noexcept;

// Supervisor side.
bool send_go(int fd);
// Go, passing passed[0..count) along (those >= 0, in order; at most
// kMaxGoFds).
bool send_go(int fd, const int* passed, int count);
// PlanReady, passing passed[0..count) along (those >= 0, in order; at most
// kMaxPassedFds).
bool send_plan_ready(int fd, const int* passed, int count);
bool send_start(int fd);
bool send_detach(int fd);
// Every message already queued, without blocking.
std::vector<ChildMessage> drain_messages(int fd);
// Waits up to `timeout_ms` for one message; a descriptor sent with it lands
// in *passed (CLOEXEC). nullopt on timeout or EOF.
std::optional<ChildMessage> receive_message(int fd, int timeout_ms, int* passed);

// As receive_message, keeping every descriptor sent with the message in
// passed[0..kMaxPassedFds) (-1 for none).
std::optional<ChildMessage> receive_message_fds(int fd, int timeout_ms, int* passed);

// "mounting overlay on /workspace: EINVAL (Invalid argument)"
std::string describe_child_error(const ChildMessage& message);

}  // namespace pulsebox::runtime
