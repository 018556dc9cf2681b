// Seccomp profiles in the Docker / OCI JSON format:
//
//   {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
//    "architectures": ["SCMP_ARCH_X86_64"],
//    "syscalls": [{"names": ["read", "write"], "action": "SCMP_ACT_ALLOW",
//                  "errnoRet": 1, "args": [{"index": 0, "value": 1,
//                  "valueTwo": 0, "op": "SCMP_CMP_EQ"}],
//                  "comment": "...", "includes": {"caps": [], "arches": [],
//                  "minKernel": "5.4"}, "excludes": {...}}]}
//
// Also accepted (and ignored): "archMap", "flags", "listenerPath",
// "listenerMetadata", the deprecated single "name". Any other key is an
// error. Errors name the file, the line and the field:
//   "p.json:12: syscalls[2].action: expected one of SCMP_ACT_ALLOW, ..., got "ALLOW""
//
// Docker's conditions are resolved for a pulsebox sandbox: the command holds
// no capabilities (entries that *include* caps are dropped, those that
// *exclude* caps kept), runs on this machine's architecture, and on this
// kernel (minKernel).
//
// With ParseOptions{.format = Format::Oci} the text is an OCI runtime-spec
// `linux.seccomp` object (an OCI runtime's container): only its keys are
// accepted (Docker's includes, excludes, archMap, comment and name are not),
// nothing is resolved against capabilities, `flags` are honoured, and what
// needs a seccomp agent (SCMP_ACT_NOTIFY, listenerPath, listenerMetadata) is
// refused. Errors then read "<source>.<path>: <why>" with no line, e.g.
//   "config.json: linux.seccomp.syscalls[2].action: ..."
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace pulsebox::seccomp {

enum class Action { Allow, Errno, KillProcess, KillThread, Trap, Log, Trace };
enum class ArgOp {
  NotEqual,
  LessThan,
  LessOrEqual,
  Equal,
  GreaterOrEqual,
  GreaterThan,
  MaskedEqual
};

struct ArgCheck {
  unsigned index = 0;
  std::uint64_t value = 0;
  std::uint64_t value_two = 0;
  ArgOp op = ArgOp::Equal;
};

struct Rule {
  std::vector<std::string> names;
  Action action = Action::Allow;
  int errno_ret = 1;  // for Errno and Trace
  std::vector<ArgCheck> args;
  std::string comment;
};

// seccomp(2) SECCOMP_FILTER_FLAG_* bits an OCI profile may ask for.
enum FilterFlag : std::uint32_t {
  kFlagTsync = 1u << 0,      // SECCOMP_FILTER_FLAG_TSYNC
  kFlagLog = 1u << 1,        // SECCOMP_FILTER_FLAG_LOG
  kFlagSpecAllow = 1u << 2,  // SECCOMP_FILTER_FLAG_SPEC_ALLOW
};

struct Profile {
  std::string name;  // "default", or the file's path
  Action default_action = Action::Errno;
  int default_errno = 1;
  std::vector<std::string> architectures;  // "SCMP_ARCH_X86_64", ...
  std::vector<Rule> rules;                 // conditions already resolved
  std::string text;                        // the JSON as read (the cache key's input)
  std::uint32_t filter_flags = 0;          // FilterFlag bits (OCI format only)
};

enum class Format { Docker, Oci };
struct ParseOptions {
  Format format = Format::Docker;
};

// The names of the OCI actions, operators, architectures and flags accepted,
// for an OCI runtime's features document.
std::vector<std::string> oci_action_names();
std::vector<std::string> oci_operator_names();
std::vector<std::string> oci_architecture_names();
std::vector<std::string> oci_flag_names();

std::string_view to_string(Action action);
std::string_view to_string(ArgOp op);

// Parses and validates `text`; `source` names it in errors.
core::Result<Profile> parse_profile(std::string_view text, const std::string& source,
                                    ParseOptions options = {});

// "default", "strict", "permissive" (built in), else a file path.
core::Result<Profile> load_profile(const std::string& name_or_path);

// The JSON text of a built-in profile or a file, unparsed (a compiled
// filter's cache key is made from it, so a cache hit needs no parse).
core::Result<std::string> read_profile_text(const std::string& name_or_path);

bool is_builtin_profile(std::string_view name);

// The built-in profiles' names.
const std::vector<std::string>& builtin_profile_names();

}  // namespace pulsebox::seccomp
