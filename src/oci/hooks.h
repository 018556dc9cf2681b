// The OCI hooks the runtime runs itself (runtime-spec config.md
// "POSIX-platform Hooks"): createRuntime (after the deprecated prestart) at
// the end of create, poststart after start, poststop in delete. Each runs in
// this process's namespaces as its `path`, with exactly its `args` (args[0]
// is argv[0]) and `env` and nothing inherited, the state JSON on stdin, in a
// process group of its own that gets SIGKILL at its timeout (hook.timeout
// seconds, else kDefaultHookTimeoutSeconds). Its output goes to the --log.
// createContainer and startContainer run inside the container
// (oci/launch/container_init.cc).
//
//   PB_CHECK(run_hooks(spec.hooks.create_runtime, state));  // a failure fails create
//   run_recorded_hooks(record, "poststart", "running");  // a failure is a warning
#pragma once

#include <sys/types.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "oci/log.h"
#include "oci/spec/spec.h"
#include "oci/state_store.h"

namespace pulsebox::oci {

inline constexpr int kDefaultHookTimeoutSeconds = 30;

// runtime-spec runtime.md "State", what a hook reads on stdin.
struct HookState {
  std::string id;
  std::string status;  // creating, created, running, stopped
  pid_t pid = 0;       // 0: left out
  std::string bundle;
  std::map<std::string, std::string> annotations;
};
std::string hook_state_json(const HookState& state);

// Where hook output and the warnings of failed poststart and poststop hooks
// go: the command's log (cmd_oci.cc sets it once per command). None: they
// are dropped.
void set_hook_log(const Log* log);

// Runs `hooks` in order and stops at the first that fails: "hooks.
// createRuntime[0] (/usr/bin/x): exited with status 3: <end of its
// stderr>", or killed by a signal, or killed at its timeout.
core::Status run_hooks(const std::vector<spec::Hook>& hooks, const HookState& state);

// Runs every one of `hooks`; one that fails is a warning in the log, and the
// rest still run (runtime-spec: poststart and poststop failures do not stop
// the lifecycle).
void run_hooks_warning_on_failure(const std::vector<spec::Hook>& hooks, const HookState& state);

// Runs the recorded poststart or poststop hooks (`kind`) of `record` with
// its state as `status`, warning on failure (a damaged hooks record is a
// warning too).
void run_recorded_hooks(const ContainerRecord& record, std::string_view kind,
                        std::string_view status);

// The poststart and poststop hooks as config.json writes them, for
// state.json (start and delete then need no config.json), and back.
nlohmann::json runtime_hooks_to_json(const spec::Hooks& hooks);
core::Result<spec::Hooks> runtime_hooks_from_json(const nlohmann::json& value,
                                                  std::string_view source);

}  // namespace pulsebox::oci
