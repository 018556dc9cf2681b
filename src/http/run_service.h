// The protocol's requests over HTTP (docs/protocol.md "HTTP"): runs with
// their events streamed, approvals answered by a second request, and the
// review requests, each as the local socket answers it. Who may name what:
//   - over the unix socket, the caller's uid (SO_PEERCRED) must own the
//     workspace it names;
//   - over TCP or TLS, nobody's uid is known: a run names an uploaded
//     workspace ("workspace_upload"), never a path of this machine.
// Each run's limits are clamped to the server's maxima, and said so.
//
// Usage (pulsebox-http's main):
//   RunService service({.state_dir = dir, .maxima = maxima});
//   register_routes(server, Services{.runs = &service, ...});
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/native_runtime.h"
#include "http/http_server.h"
#include "protocol/messages.h"
#include "run/run_command.h"

namespace pulsebox::http {

// The most a run may ask for; unset: no maximum of the server's.
struct RunMaxima {
  std::string memory, pids, cpus, timeout, disk;  // as the CLI flags take them
};

struct RunServiceOptions {
  std::filesystem::path state_dir;
  RunMaxima maxima;
  // The tree of an uploaded workspace ("sha256:HEX"), held in use (not
  // evicted) while `in_use` lives; nullopt when there is none.
  struct FoundUpload {
    std::filesystem::path root;
    std::shared_ptr<const void> in_use;
  };
  std::function<std::optional<FoundUpload>(const std::string& upload)> find_upload;
};

class RunService {
 public:
  explicit RunService(RunServiceOptions options);

  // POST /v1/runs
  void run(RunStream& stream);
  // POST /v1/runs/<run_id>/approvals: {"v":1,"approval_id":...,"decision":...}
  void answer(const httplib::Request& request, httplib::Response& response,
              const ClientIdentity& client);

 private:
  struct Approvals;
  // create: a new entry for the run, or null when a live run has the id;
  // else the live run's entry, or null.
  std::shared_ptr<Approvals> approvals_for(const std::string& run_id, bool create);

  RunServiceOptions options_;
  std::shared_ptr<backends::NativeRuntime> runtime_;
  std::mutex approvals_mutex_;
  std::map<std::string, std::weak_ptr<Approvals>> approvals_;
};

// Clamps `options`' limits to `maxima`: each one above its maximum, or
// unset where a maximum is, becomes the maximum. Returns what was changed,
// one "limits.memory: 8G asked, 2G is this server's maximum" each;
// throws SandboxConfigError (naming the field) for a value that does not
// parse.
std::vector<std::string> clamp_limits(run::RunOptions& options, const RunMaxima& maxima);

}  // namespace pulsebox::http
