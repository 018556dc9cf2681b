#include "http/peer_aware_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "http/peer_stream.h"

namespace pulsebox::http {
namespace {

thread_local const Connection* this_threads_connection = nullptr;

// Waits for the next request on a kept-alive connection; false when the
// server stops, the peer leaves, or the keep-alive timeout passes.
bool next_request_arrives(const std::atomic<socket_t>& listener, int socket,
                          std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (listener != INVALID_SOCKET && std::chrono::steady_clock::now() < deadline) {
    pollfd entry{.fd = socket, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&entry, 1, 100);
    if (ready < 0 && errno != EINTR) return false;
    if (ready > 0) return (entry.revents & POLLIN) != 0;
  }
  return false;
}

ClientIdentity identify(int socket, const std::string& unix_path) {
  ClientIdentity client;
  if (!unix_path.empty()) {
    client.transport = "unix";
    client.address = unix_path;
    ucred credentials{};
    socklen_t length = sizeof credentials;
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 &&
        length == sizeof credentials) {
      client.uid = credentials.uid;
      client.pid = credentials.pid;
    }
    return client;
  }
  client.transport = "tcp";
  std::string ip;
  int port = -1;
  socket_address(socket, true, ip, port);
  client.address =
      (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
  return client;
}

// A response sent before the request's body was read (a refused token) is
// lost if the socket is closed with that body unread: the kernel answers
// the unread bytes with a reset, which can overtake the response. So the
// writing side is shut first, and what the client still sends is read and
// dropped (bounded in time and bytes) before the close, as web servers'
// "lingering close" does.
void close_lingering(int sock) {
  ::shutdown(sock, SHUT_WR);
  char sink[16384];
  std::size_t drained = 0;
  for (int round = 0; round < 20 && drained < (8u << 20); ++round) {
    pollfd entry{sock, POLLIN, 0};
    if (::poll(&entry, 1, 50) <= 0) break;
    const ssize_t n = ::recv(sock, sink, sizeof sink, MSG_DONTWAIT);
    if (n <= 0) break;  // the client closed too: nothing more can arrive
    drained += static_cast<std::size_t>(n);
  }
  ::close(sock);
}

}  // namespace

std::string ClientIdentity::describe() const {
  std::string text = transport;
  if (uid) text += " uid=" + std::to_string(*uid);
  if (pid) text += " pid=" + std::to_string(*pid);
  return text + " " + address;
}

const Connection* current_connection() {
  return this_threads_connection;
}

bool PeerAwareServer::process_and_close_socket(socket_t sock) {
  const Connection connection{.client = identify(sock, unix_path_), .socket = sock};
  this_threads_connection = &connection;
  const int read_ms = static_cast<int>(read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000);
  const int write_ms = static_cast<int>(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
  bool ok = false;
  for (size_t count = keep_alive_max_count_; count > 0; --count) {
    if (!next_request_arrives(svr_sock_, sock, std::chrono::seconds(keep_alive_timeout_sec_)))
      break;
    PeerStream stream(sock, read_ms, write_ms);
    bool connection_closed = false;
    ok = process_request(stream, count == 1, connection_closed, nullptr);
    if (!ok || connection_closed) break;
  }
  this_threads_connection = nullptr;
  close_lingering(sock);
  return ok;
}

}  // namespace pulsebox::http
