// The local server's protocol (`pulsebox serve --local`, `pulsebox run`
// through it): one SOCK_SEQPACKET message each way over a Unix socket.
//
//   client -> server   RunRequest: the `run` arguments, the client's
//                      environment, working directory and umask, and which
//                      pulsebox binary it is; with it (SCM_RIGHTS) the
//                      client's working directory (O_PATH), stdout, stderr,
//                      stdin
//   server -> client   RunReply: Done with the exit status (the output went
//                      to the client's own stdout/stderr meanwhile), or
//                      Fallback with the reason: the client runs the
//                      command itself, as if there were no server
//
// The client then waits; if it goes away, its connection's hang-up cancels
// the run. Both ends check the other's uid (SO_PEERCRED).
//
// Layout: "PBRQ" or "PBRP", a 32-bit version, then fields; strings are a
// 32-bit length and the bytes; lists are a 32-bit count and the strings.
// Everything is host byte order (both ends are on one machine).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "server/protocol_constants.h"

namespace pulsebox::server {

struct RunRequest {
  std::vector<std::string> args;         // after "run", "--" and the command included
  std::vector<std::string> environment;  // NAME=VALUE
  std::string cwd;                       // for messages only: the descriptor is what counts
  std::uint32_t umask = 022;
  std::string client_binary;  // binary_identity() of the client
};

struct RunReply {
  ReplyKind kind = ReplyKind::Done;
  std::int32_t exit_code = 0;
  std::string reason;  // Fallback: why
};

std::string encode(const RunRequest& request);
std::string encode(const RunReply& reply);
// kInvalidInput naming what is wrong with the bytes.
core::Result<RunRequest> decode_request(std::string_view bytes);
core::Result<RunReply> decode_reply(std::string_view bytes);

// PULSEBOX_CLIENT_IDENTITY: a server answers clients of the same release
// and protocol version (any binary of it: a Python or Go client speaks the
// JSON protocol socket instead, docs/protocol.md).
std::string binary_identity();

// One message with up to `fds.size()` descriptors (SCM_RIGHTS). 0 or errno.
int send_message(int socket, std::string_view bytes, const std::vector<int>& fds = {});
// One message of at most `limit` bytes and up to `max_fds` descriptors
// (CLOEXEC). nullopt with errno set on failure; EMSGSIZE when the message
// or its descriptors did not fit; ECONNRESET on EOF.
struct Received {
  std::string bytes;
  std::vector<core::UniqueFd> fds;
};
std::optional<Received> receive_message(int socket, std::size_t limit, std::size_t max_fds);

// The uid at the other end of a connected Unix socket, or nullopt.
std::optional<uid_t> peer_uid(int socket);

}  // namespace pulsebox::server
