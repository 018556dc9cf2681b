// pulsebox request: the protocol's requests other than run (docs/protocol.md
// "Other requests") without a server. One request object on stdin, its
// reply on stdout as one line; exit 0, or 125 when the reply is an error.
// `pulsebox run --events` is the same carrier for runs.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/json_parse.h"
#include "protocol/messages.h"
#include "protocol/operations.h"
#include "pulsebox/version.h"
#include "run/run_command.h"

namespace pulsebox::cli {
namespace {

using protocol::ErrorCode;
using protocol::ProtocolError;

// As much as an HTTP server reads of a body other than an upload.
constexpr std::size_t kMaxRequestBytes = 64u << 20;

int answer_with(const std::string& line, bool failed) {
  std::cout << line << "\n" << std::flush;
  return failed ? run::kExitRefused : kExitOk;
}

int refuse(const ProtocolError& error) {
  return answer_with(protocol::error_response(error), true);
}

int run_request() {
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return refuse({ErrorCode::InvalidRequest,
                     std::string("reading the request from stdin: ") + std::strerror(errno),
                     "",
                     {}});
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > kMaxRequestBytes) {
      return refuse({ErrorCode::TooLarge, "the request is over 64 MiB", "", {}});
    }
  }
  auto body = core::parse_json(text, "the request");
  if (!body) return refuse({ErrorCode::InvalidRequest, body.error().to_string(), "", {}});
  const nlohmann::json& request = body.value();
  const std::string name =
      request.is_object() && request.contains("request") && request["request"].is_string()
          ? request["request"].get<std::string>()
          : "";
  if (name == "run") {
    return refuse({ErrorCode::InvalidRequest,
                   "request: a run goes through `pulsebox run --events` (or a server)",
                   "request",
                   {}});
  }
  if (name == "health") {
    protocol::Json reply = {{"v", protocol::kProtocolVersion},
                            {"status", "ok"},
                            {"version", std::string(pulsebox::version())},
                            {"runs", {{"active", 0}, {"queued", 0}}}};
    return answer_with(reply.dump(), false);
  }
  const uid_t uid = ::geteuid();
  const protocol::Caller caller{.identity = "uid " + std::to_string(uid) + " (pulsebox request)",
                                .uid = uid};
  const auto answer = protocol::handle_operation(name, request, caller);
  if (answer.error) return refuse(*answer.error);
  return answer_with(answer.body.dump(-1, ' ', false, protocol::Json::error_handler_t::replace),
                     false);
}

}  // namespace

void register_request_command(CLI::App& app, int& exit_code) {
  CLI::App* request = app.add_subcommand(
      "request",
      "Answer one protocol request read from stdin (changes, diff, commit, discard, read_file, "
      "create_transaction, stage_write, stage_delete, capabilities, health) with one JSON line");
  request->callback([&exit_code] { exit_code = run_request(); });
}

}  // namespace pulsebox::cli
