#include "cli/server_client.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "backends/native_runtime.h"
#include "cli/exit_codes.h"
#include "cli/fast_client.h"
#include "core/text.h"
#include "core/trace.h"
#include "core/unique_fd.h"
#include "server/local_server.h"
#include "server/protocol.h"

extern char** environ;

namespace pulsebox::cli {

namespace {

void warn(const std::string& message) {
  const std::string line = "pulsebox: " + message + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

std::optional<int> run_through_server(int argc, char** argv) {
  // The pre-libc client (static builds) found no server, or was told to
  // run in-process: nothing to add.
  if (pulsebox_fast_client_verdict != kFastNotTried) return std::nullopt;
  const char* chosen = std::getenv("PULSEBOX_SERVER");
  const std::string_view choice = chosen != nullptr ? chosen : "";
  if (choice == "off" || choice == "0" || choice == "no" || choice == "none") return std::nullopt;
  // An explicit socket that does not answer is worth a word; the default
  // one missing is the normal case.
  const bool explicit_socket = !choice.empty();
  const std::string path =
      explicit_socket ? std::string(choice)
                      : server::default_socket_path(backends::default_state_dir()).string();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    if (explicit_socket) warn("PULSEBOX_SERVER=" + path + ": the path is too long for a socket");
    return std::nullopt;
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  core::UniqueFd connection(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!connection ||
      ::connect(connection.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    if (explicit_socket) {
      warn("PULSEBOX_SERVER=" + path + ": " + core::describe_errno(errno) +
           "; running in this process");
    }
    return std::nullopt;
  }
  // Only a server of this very user gets the environment and the output.
  const auto server_uid = server::peer_uid(connection.get());
  if (!server_uid || *server_uid != ::geteuid()) {
    warn("the socket " + path + " belongs to another user; not using it");
    return std::nullopt;
  }
  core::trace_phase("client: connected");

  server::RunRequest request;
  request.args.assign(argv + 2, argv + argc);
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry)
    request.environment.emplace_back(*entry);
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) != nullptr) request.cwd = cwd;
  const mode_t mask = ::umask(0);
  ::umask(mask);
  request.umask = mask;
  request.client_binary = server::binary_identity();
  const std::string bytes = server::encode(request);
  if (bytes.size() > server::kMaxRequestBytes) return std::nullopt;  // a huge environment
  core::UniqueFd here(::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!here || ::fcntl(STDIN_FILENO, F_GETFD) < 0 || ::fcntl(STDOUT_FILENO, F_GETFD) < 0 ||
      ::fcntl(STDERR_FILENO, F_GETFD) < 0) {
    return std::nullopt;  // the in-process run reports what is wrong
  }
  if (server::send_message(connection.get(), bytes,
                           {here.get(), STDOUT_FILENO, STDERR_FILENO, STDIN_FILENO}) != 0) {
    return std::nullopt;
  }
  here.reset();
  // The run goes on in the server; its output arrives on our own stdout and
  // stderr. If this process is ended meanwhile, the hang-up cancels the run.
  auto message = server::receive_message(connection.get(), 64 * 1024, 0);
  if (!message) {
    warn("the server at " + path + " ended during the run (" + core::describe_errno(errno) +
         "); the command's result is unknown: see the server's stderr, and run it again "
         "(PULSEBOX_SERVER=off runs it in this process)");
    return kExitUsage;
  }
  auto reply = server::decode_reply(message->bytes);
  if (!reply) {
    warn("the server at " + path + " answered: " + reply.error().to_string() +
         " (is it another pulsebox version? restart it, or set PULSEBOX_SERVER=off)");
    return kExitUsage;
  }
  core::trace_phase("client: reply");
  if (reply.value().kind == server::ReplyKind::Fallback) {
    if (explicit_socket)
      warn("the server ran nothing (" + reply.value().reason + "); running in this process");
    return std::nullopt;
  }
  return reply.value().exit_code;
}

}  // namespace pulsebox::cli
