#include "server/protocol.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace pulsebox::server {

using core::Error;
using core::ErrorKind;

namespace {

constexpr std::string_view kRequestMagic = "PBRQ";
constexpr std::string_view kReplyMagic = "PBRP";

void put_u32(std::string& out, std::uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
void put_string(std::string& out, std::string_view text) {
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  out.append(text);
}
void put_list(std::string& out, const std::vector<std::string>& items) {
  put_u32(out, static_cast<std::uint32_t>(items.size()));
  for (const auto& item : items)
    put_string(out, item);
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  bool u32(std::uint32_t& value) {
    if (bytes_.size() - at_ < sizeof value) return false;
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return true;
  }
  bool string(std::string& text) {
    std::uint32_t size = 0;
    if (!u32(size) || bytes_.size() - at_ < size) return false;
    text.assign(bytes_.data() + at_, size);
    at_ += size;
    return true;
  }
  bool list(std::vector<std::string>& items) {
    std::uint32_t count = 0;
    if (!u32(count)) return false;
    // Each item takes at least its 4-byte length: a count that cannot fit is
    // refused before anything is allocated for it.
    if (count > (bytes_.size() - at_) / sizeof(std::uint32_t)) return false;
    items.resize(count);
    for (auto& item : items) {
      if (!string(item)) return false;
    }
    return true;
  }
  bool magic(std::string_view expected) {
    if (bytes_.substr(at_, expected.size()) != expected) return false;
    at_ += expected.size();
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

Error malformed(std::string_view what) {
  return Error(ErrorKind::kInvalidInput, "server", "malformed " + std::string(what));
}

}  // namespace

std::string encode(const RunRequest& request) {
  std::string out(kRequestMagic);
  put_u32(out, kProtocolVersion);
  put_string(out, request.client_binary);
  put_list(out, request.args);
  put_list(out, request.environment);
  put_string(out, request.cwd);
  put_u32(out, request.umask);
  return out;
}

std::string encode(const RunReply& reply) {
  std::string out(kReplyMagic);
  put_u32(out, kProtocolVersion);
  put_u32(out, static_cast<std::uint32_t>(reply.kind));
  put_u32(out, static_cast<std::uint32_t>(reply.exit_code));
  put_string(out, reply.reason);
  return out;
}

core::Result<RunRequest> decode_request(std::string_view bytes) {
  Reader in(bytes);
  std::uint32_t version = 0;
  if (!in.magic(kRequestMagic) || !in.u32(version)) return malformed("request (no header)");
  if (version != kProtocolVersion) {
    return Error(ErrorKind::kInvalidInput, "server",
                 "protocol version " + std::to_string(version) + ", expected " +
                     std::to_string(kProtocolVersion));
  }
  RunRequest request;
  if (!in.string(request.client_binary) || !in.list(request.args) ||
      !in.list(request.environment) || !in.string(request.cwd) || !in.u32(request.umask) ||
      !in.done()) {
    return malformed("request");
  }
  return request;
}

core::Result<RunReply> decode_reply(std::string_view bytes) {
  Reader in(bytes);
  std::uint32_t version = 0, kind = 0, code = 0;
  RunReply reply;
  if (!in.magic(kReplyMagic) || !in.u32(version) || version != kProtocolVersion || !in.u32(kind) ||
      !in.u32(code) || !in.string(reply.reason) || !in.done() ||
      (kind != static_cast<std::uint32_t>(ReplyKind::Done) &&
       kind != static_cast<std::uint32_t>(ReplyKind::Fallback))) {
    return malformed("reply");
  }
  reply.kind = static_cast<ReplyKind>(kind);
  reply.exit_code = static_cast<std::int32_t>(code);
  return reply;
}

std::string binary_identity() {
  return PULSEBOX_CLIENT_IDENTITY;
}

int send_message(int socket, std::string_view bytes, const std::vector<int>& fds) {
  iovec data{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    control.resize(CMSG_SPACE(sizeof(int) * fds.size()));
    header.msg_control = control.data();
    header.msg_controllen = control.size();
    cmsghdr* item = CMSG_FIRSTHDR(&header);
    item->cmsg_level = SOL_SOCKET;
    item->cmsg_type = SCM_RIGHTS;
    item->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(item), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    if (::sendmsg(socket, &header, MSG_NOSIGNAL) >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

std::optional<Received> receive_message(int socket, std::size_t limit, std::size_t max_fds) {
  Received received;
  // One buffer per thread, made once and never zeroed: zeroing a fresh one
  // for each request cost more than the rest of reading it, and zeroing it
  // once kept all of it resident in each worker (~200 KiB each) where a
  // request touches only its own few kilobytes.
  thread_local std::unique_ptr<char[]> buffer;
  thread_local std::size_t buffer_size = 0;
  if (buffer_size < limit) {
    buffer.reset(new char[limit]);
    buffer_size = limit;
  }
  iovec data{buffer.get(), limit};
  msghdr header{};
  header.msg_iov = &data;
  header.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * max_fds));
  header.msg_control = control.data();
  header.msg_controllen = control.size();
  ssize_t n = 0;
  do {
    n = ::recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return std::nullopt;
  // Whatever arrived is owned from here, even if the message is refused.
  for (cmsghdr* item = CMSG_FIRSTHDR(&header); item != nullptr; item = CMSG_NXTHDR(&header, item)) {
    if (item->cmsg_level != SOL_SOCKET || item->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (item->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(item) + i * sizeof(int), sizeof fd);
      received.fds.emplace_back(fd);
    }
  }
  if (n == 0) {
    errno = ECONNRESET;
    return std::nullopt;
  }
  if ((header.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    errno = EMSGSIZE;
    return std::nullopt;
  }
  received.bytes.assign(buffer.get(), static_cast<std::size_t>(n));
  return received;
}

std::optional<uid_t> peer_uid(int socket) {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return std::nullopt;
  return credentials.uid;
}

}  // namespace pulsebox::server
