#include "runtime/sync_channel.h"

#include "core/text.h"
#include "linux/syscalls.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pulsebox::runtime {
namespace {

void copy_text(char* to, std::size_t size, const char* from) noexcept {
  std::size_t i = 0;
  for (; from != nullptr && from[i] != '\0' && i + 1 < size; ++i)
    to[i] = from[i];
  to[i] = '\0';
}

// The child side makes raw system calls: it shares the supervisor's memory
// (linux/clone.h).
void send_message(int fd, const ChildMessage& message) noexcept {
  while (linux_api::raw(SYS_sendto, fd, &message, sizeof message, MSG_NOSIGNAL, nullptr, 0) ==
         -EINTR) {
  }
}

// The most descriptors any message carries.
constexpr int kMaxFdsInMessage = kMaxGoFds > kMaxPassedFds ? kMaxGoFds : kMaxPassedFds;

// One message, with passed[0..count) (those >= 0) as SCM_RIGHTS (raw: the
// children use it). Returns 0 or the errno.
int send_with_fds(int fd, const ChildMessage& message, const int* passed, int count) noexcept {
  iovec data{const_cast<ChildMessage*>(&message), sizeof message};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsInMessage)] = {};
  int fds[kMaxFdsInMessage];
  int n = 0;
  for (int i = 0; i < count && n < kMaxFdsInMessage; ++i) {
    if (passed[i] >= 0) fds[n++] = passed[i];
  }
  if (n > 0) {
    header.msg_control = control;
    header.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<unsigned>(n));
    cmsghdr* item = CMSG_FIRSTHDR(&header);
    item->cmsg_level = SOL_SOCKET;
    item->cmsg_type = SCM_RIGHTS;
    item->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<unsigned>(n));
    __builtin_memcpy(CMSG_DATA(item), fds, sizeof(int) * static_cast<unsigned>(n));
  }
  for (;;) {
    const long sent = linux_api::raw(SYS_sendmsg, fd, &header, MSG_NOSIGNAL);
    if (sent != -EINTR) return linux_api::raw_error(sent);
  }
}

int send_with_fd(int fd, const ChildMessage& message, int passed_fd) noexcept {
  return send_with_fds(fd, message, &passed_fd, 1);
}

// One message, and the descriptors sent with it in passed[0..capacity)
// (CLOEXEC, in the order sent; -1 for none; the kernel closes any beyond
// `capacity`). Raw: the children use it too. Returns recvmsg's result (the
// bytes, or -errno).
long receive_with_fds(int fd, ChildMessage& message, int flags, int* passed,
                      int capacity = kMaxPassedFds) noexcept {
  for (int i = 0; i < capacity; ++i)
    passed[i] = -1;
  iovec data{&message, sizeof message};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsInMessage)] = {};
  header.msg_control = control;
  header.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<unsigned>(capacity));
  long n = 0;
  do {
    n = linux_api::raw(SYS_recvmsg, fd, &header, flags | MSG_CMSG_CLOEXEC);
  } while (n == -EINTR);
  // Room for `capacity` descriptors: a sender never passes more.
  const cmsghdr* item = n >= 0 ? CMSG_FIRSTHDR(&header) : nullptr;
  if (item != nullptr && item->cmsg_level == SOL_SOCKET && item->cmsg_type == SCM_RIGHTS) {
    const auto bytes = item->cmsg_len - CMSG_LEN(0);
    const auto count = static_cast<int>(bytes / sizeof(int));
    __builtin_memcpy(passed, CMSG_DATA(item),
                     sizeof(int) * static_cast<unsigned>(count < capacity ? count : capacity));
  }
  return n;
}

}  // namespace

ChildMessage child_error(const char* stage, const char* detail, int error_number) noexcept {
  ChildMessage message;
  message.kind = ChildMessageKind::Error;
  message.error_number = error_number;
  copy_text(message.stage, sizeof message.stage, stage);
  copy_text(message.detail, sizeof message.detail, detail);
  return message;
}

void send_child_error(int fd, const char* stage, const char* detail, int error_number) noexcept {
  send_message(fd, child_error(stage, detail, error_number));
}

void send_child_exited(int fd, int wait_status) noexcept {
  ChildMessage message;
  message.kind = ChildMessageKind::Exited;
  message.wait_status = wait_status;
  send_message(fd, message);
}

int send_child_ready(int fd, int passed_fd) noexcept {
  ChildMessage message;
  message.kind = ChildMessageKind::Ready;
  return send_with_fd(fd, message, passed_fd);
}

int send_child_changes(int fd, int directory) noexcept {
  ChildMessage message;
  message.kind = ChildMessageKind::Changes;
  return send_with_fd(fd, message, directory);
}

int send_child_terminal(int fd, int master) noexcept {
  ChildMessage message;
  message.kind = ChildMessageKind::Terminal;
  return send_with_fd(fd, message, master);
}

int send_child_network(int fd, const int* fds, int count) noexcept {
  ChildMessage message;
  message.kind = ChildMessageKind::Network;
  return send_with_fds(fd, message, fds, count);
}

namespace {

bool wait_for(int fd, ChildMessageKind kind) noexcept {
  ChildMessage message;
  for (;;) {
    const long n = linux_api::raw(SYS_recvfrom, fd, &message, sizeof message, 0, nullptr, nullptr);
    if (n == -EINTR) continue;
    return n == static_cast<long>(sizeof message) && message.kind == kind;
  }
}

bool send_kind(int fd, ChildMessageKind kind) {
  ChildMessage message;
  message.kind = kind;
  return ::send(fd, &message, sizeof message, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof message);
}

}  // namespace

bool wait_for_go(int fd) noexcept {
  return wait_for(fd, ChildMessageKind::Go);
}

bool wait_for_go(int fd, int* passed) noexcept {
  ChildMessage message;
  const long n = receive_with_fds(fd, message, 0, passed, kMaxGoFds);
  return n == static_cast<long>(sizeof message) && message.kind == ChildMessageKind::Go;
}

bool wait_for_start(int fd) noexcept {
  return wait_for(fd, ChildMessageKind::Start);
}

bool wait_for_detach(int fd) noexcept {
  return wait_for(fd, ChildMessageKind::Detach);
}

void send_child_detached(int fd) noexcept {
  ChildMessage message;
  message.kind = ChildMessageKind::Detached;
  send_message(fd, message);
}

bool wait_for_plan_ready(int fd, int* passed) noexcept {
  ChildMessage message;
  const long n = receive_with_fds(fd, message, 0, passed);
  return n == static_cast<long>(sizeof message) && message.kind == ChildMessageKind::PlanReady;
}

bool send_go(int fd) {
  return send_kind(fd, ChildMessageKind::Go);
}

bool send_go(int fd, const int* passed, int count) {
  ChildMessage message;
  message.kind = ChildMessageKind::Go;
  return send_with_fds(fd, message, passed, count < kMaxGoFds ? count : kMaxGoFds) == 0;
}

bool send_start(int fd) {
  return send_kind(fd, ChildMessageKind::Start);
}

bool send_detach(int fd) {
  return send_kind(fd, ChildMessageKind::Detach);
}

bool send_plan_ready(int fd, const int* passed, int count) {
  ChildMessage message;
  message.kind = ChildMessageKind::PlanReady;
  return send_with_fds(fd, message, passed, count) == 0;
}

std::vector<ChildMessage> drain_messages(int fd) {
  std::vector<ChildMessage> messages;
  for (;;) {
    ChildMessage message;
    const ssize_t n = ::recv(fd, &message, sizeof message, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof message)) break;
    message.stage[sizeof message.stage - 1] = '\0';
    message.detail[sizeof message.detail - 1] = '\0';
    messages.push_back(message);
  }
  return messages;
}

std::optional<ChildMessage> receive_message_fds(int fd, int timeout_ms, int* passed) {
  for (int i = 0; i < kMaxPassedFds; ++i)
    passed[i] = -1;
  pollfd waiting{fd, POLLIN, 0};
  int ready = 0;
  do {
    ready = ::poll(&waiting, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready <= 0) return std::nullopt;
  ChildMessage message;
  const long n = receive_with_fds(fd, message, MSG_DONTWAIT, passed);
  if (n != static_cast<long>(sizeof message)) return std::nullopt;
  message.stage[sizeof message.stage - 1] = '\0';
  message.detail[sizeof message.detail - 1] = '\0';
  return message;
}

std::optional<ChildMessage> receive_message(int fd, int timeout_ms, int* passed) {
  int all[kMaxPassedFds];
  auto message = receive_message_fds(fd, timeout_ms, all);
  for (int i = 0; i < kMaxPassedFds; ++i) {
    if (i == 0 && passed != nullptr) {
      *passed = all[0];
    } else if (all[i] >= 0) {
      ::close(all[i]);
    }
  }
  return message;
}

std::string describe_child_error(const ChildMessage& message) {
  std::string text = message.stage;
  if (message.detail[0] != '\0') text += std::string(" ") + message.detail;
  if (message.error_number != 0) text += ": " + core::describe_errno(message.error_number);
  return text;
}

}  // namespace pulsebox::runtime
