// An httplib::Stream over one accepted socket, for PeerAwareServer
// (http/peer_aware_server.h): reads and writes wait with poll() up to the
// server's timeouts, and reads are buffered (httplib reads header lines a
// byte at a time).
#pragma once

#include <httplib.h>

#include <string>
#include <vector>

namespace pulsebox::http {

class PeerStream : public httplib::Stream {
 public:
  PeerStream(int socket, int read_timeout_ms, int write_timeout_ms);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override;

 private:
  int socket_;
  int read_timeout_ms_;
  int write_timeout_ms_;
  std::vector<char> buffer_;
  size_t buffered_begin_ = 0;
  size_t buffered_end_ = 0;
};

// "ADDRESS" and port of a TCP socket's peer (or its own end); "" and -1
// for a unix socket.
void socket_address(int socket, bool peer, std::string& ip, int& port);

}  // namespace pulsebox::http
