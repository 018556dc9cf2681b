#include "http/peer_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pulsebox::http {
namespace {

constexpr size_t kBufferBytes = 4096;

bool wait_for(int socket, short events, int timeout_ms) {
  pollfd entry{.fd = socket, .events = events, .revents = 0};
  int ready;
  do {
    ready = ::poll(&entry, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && (entry.revents & (events | POLLHUP | POLLERR)) != 0;
}

}  // namespace

void socket_address(int socket, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  ip.clear();
  port = -1;
  if ((peer ? ::getpeername(socket, raw, &length) : ::getsockname(socket, raw, &length)) != 0)
    return;
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

PeerStream::PeerStream(int socket, int read_timeout_ms, int write_timeout_ms)
    : socket_(socket),
      read_timeout_ms_(read_timeout_ms),
      write_timeout_ms_(write_timeout_ms),
      buffer_(kBufferBytes) {}

bool PeerStream::is_readable() const {
  return buffered_begin_ < buffered_end_ || wait_for(socket_, POLLIN, read_timeout_ms_);
}

bool PeerStream::is_writable() const {
  // A peer that hung up cannot take more: stop before writing into it.
  pollfd entry{.fd = socket_, .events = POLLOUT | POLLRDHUP, .revents = 0};
  if (::poll(&entry, 1, 0) > 0 && (entry.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0)
    return false;
  return wait_for(socket_, POLLOUT, write_timeout_ms_);
}

ssize_t PeerStream::read(char* ptr, size_t size) {
  if (buffered_begin_ == buffered_end_) {
    if (!wait_for(socket_, POLLIN, read_timeout_ms_)) return -1;
    ssize_t n;
    do {
      n = ::recv(socket_, buffer_.data(), buffer_.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    buffered_begin_ = 0;
    buffered_end_ = static_cast<size_t>(n);
  }
  const size_t count = std::min(size, buffered_end_ - buffered_begin_);
  std::memcpy(ptr, buffer_.data() + buffered_begin_, count);
  buffered_begin_ += count;
  return static_cast<ssize_t>(count);
}

ssize_t PeerStream::write(const char* ptr, size_t size) {
  if (!wait_for(socket_, POLLOUT, write_timeout_ms_)) return -1;
  ssize_t n;
  do {
    n = ::send(socket_, ptr, size, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

void PeerStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  socket_address(socket_, true, ip, port);
}

void PeerStream::get_local_ip_and_port(std::string& ip, int& port) const {
  socket_address(socket_, false, ip, port);
}

socket_t PeerStream::socket() const {
  return socket_;
}

}  // namespace pulsebox::http
