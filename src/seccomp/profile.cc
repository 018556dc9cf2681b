#include "seccomp/profile.h"

#include <sys/utsname.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/json_lines.h"
#include "core/json_parse.h"
#include "core/text.h"

namespace pulsebox::seccomp {

// In builtin_profiles.cc, generated from seccomp-profiles/*.json.
const std::vector<std::pair<std::string_view, std::string_view>>& builtin_profiles();

using core::Error;
using core::ErrorKind;
using json = nlohmann::json;

namespace {

// Docker's default profile is about 20 KB.
constexpr std::uint64_t kMaxProfileBytes = 4ull << 20;

constexpr std::pair<std::string_view, Action> kActions[] = {
    {"SCMP_ACT_ALLOW", Action::Allow},
    {"SCMP_ACT_ERRNO", Action::Errno},
    {"SCMP_ACT_KILL_PROCESS", Action::KillProcess},
    {"SCMP_ACT_KILL", Action::KillThread},
    {"SCMP_ACT_KILL_THREAD", Action::KillThread},
    {"SCMP_ACT_TRAP", Action::Trap},
    {"SCMP_ACT_LOG", Action::Log},
    {"SCMP_ACT_TRACE", Action::Trace},
};
constexpr std::pair<std::string_view, ArgOp> kOps[] = {
    {"SCMP_CMP_NE", ArgOp::NotEqual},           {"SCMP_CMP_LT", ArgOp::LessThan},
    {"SCMP_CMP_LE", ArgOp::LessOrEqual},        {"SCMP_CMP_EQ", ArgOp::Equal},
    {"SCMP_CMP_GE", ArgOp::GreaterOrEqual},     {"SCMP_CMP_GT", ArgOp::GreaterThan},
    {"SCMP_CMP_MASKED_EQ", ArgOp::MaskedEqual},
};
// SECCOMP_FILTER_FLAG_NEW_LISTENER and _WAIT_KILLABLE_RECV need an agent.
constexpr std::pair<std::string_view, std::uint32_t> kFlags[] = {
    {"SECCOMP_FILTER_FLAG_TSYNC", kFlagTsync},
    {"SECCOMP_FILTER_FLAG_LOG", kFlagLog},
    {"SECCOMP_FILTER_FLAG_SPEC_ALLOW", kFlagSpecAllow},
};
constexpr std::string_view kArchitectures[] = {
    "SCMP_ARCH_X86_64", "SCMP_ARCH_X86",      "SCMP_ARCH_X32",        "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_ARM",    "SCMP_ARCH_RISCV64",  "SCMP_ARCH_S390X",      "SCMP_ARCH_PPC64LE",
    "SCMP_ARCH_MIPS64", "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_LOONGARCH64"};

// Docker's "arches" names for this machine.
bool is_native_arch(const std::string& arch) {
#if defined(__x86_64__)
  return arch == "amd64" || arch == "x86_64" || arch == "SCMP_ARCH_X86_64";
#elif defined(__aarch64__)
  return arch == "arm64" || arch == "aarch64" || arch == "SCMP_ARCH_AARCH64";
#else
  return false;
#endif
}

// "5.4" <= this kernel?
bool kernel_at_least(const std::string& version) {
  utsname name{};
  if (::uname(&name) != 0) return false;
  int want_major = 0, want_minor = 0, have_major = 0, have_minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &want_major, &want_minor) < 1) return false;
  if (std::sscanf(name.release, "%d.%d", &have_major, &have_minor) < 1) return false;
  return have_major > want_major || (have_major == want_major && have_minor >= want_minor);
}

class Parser {
 public:
  // `text` must outlive the parser.
  Parser(std::string_view text, std::string source, ParseOptions options)
      : text_(text), source_(std::move(source)), oci_(options.format == Format::Oci) {}

  Error error(const std::string& path, const std::string& message) const {
    // An OCI profile is a subtree of config.json: its own lines mean nothing.
    if (oci_) {
      // A refusal says what to do itself; anything else points to the spec.
      const bool refused = message.find("not supported") != std::string::npos;
      return Error(refused ? ErrorKind::kUnsupported : ErrorKind::kInvalidInput, "seccomp",
                   source_ + (path.empty() ? "" : "." + path) + ": " + message +
                       (message.find("; ") == std::string::npos
                            ? "; correct it (runtime-spec config-linux.md, seccomp)"
                            : ""));
    }
    std::string where = source_;
    if (auto line = core::json_value_line(text_, path)) where += ":" + std::to_string(*line);
    return Error(
        ErrorKind::kInvalidInput, "seccomp",
        where + ": " + (path.empty() ? std::string("the profile") : path) + ": " + message);
  }

  core::Status check_keys(const json& object, const std::string& path,
                          std::initializer_list<std::string_view> allowed) const {
    if (!object.is_object()) return error(path, "expected an object");
    for (const auto& [key, value] : object.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (auto name : allowed)
          list += (list.empty() ? "" : ", ") + std::string(name);
        return error(path.empty() ? key : path + "." + key,
                     "unknown key (expected one of " + list + ")");
      }
    }
    return {};
  }

  core::Result<std::string> string_at(const json& value, const std::string& path) const {
    if (!value.is_string()) return error(path, "expected a string");
    return value.get<std::string>();
  }

  core::Result<Action> action_at(const json& value, const std::string& path) const {
    PB_TRY(text, string_at(value, path));
    for (const auto& [name, action] : kActions) {
      if (name == text) return action;
    }
    if (text == "SCMP_ACT_NOTIFY") {
      if (oci_) {
        return error(path,
                     "SCMP_ACT_NOTIFY: not supported: pulsebox oci runs no seccomp agents; "
                     "use another action");
      }
      return error(path, "SCMP_ACT_NOTIFY is reserved: pulsebox supervises the sandbox itself");
    }
    std::string list;
    for (const auto& [name, action] : kActions)
      list += (list.empty() ? "" : ", ") + std::string(name);
    return error(path, "expected one of " + list + ", got \"" + text + "\"");
  }

  core::Result<int> errno_at(const json& value, const std::string& path) const {
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() > 4095) {
      return error(path, "expected an errno number between 0 and 4095");
    }
    return static_cast<int>(value.get<std::uint64_t>());
  }

  core::Result<std::uint64_t> u64_at(const json& value, const std::string& path) const {
    if (!value.is_number_unsigned()) return error(path, "expected a non-negative integer");
    return value.get<std::uint64_t>();
  }

  // Docker's includes/excludes, for a sandbox with no capabilities.
  core::Result<bool> condition_holds(const json& condition, const std::string& path) const {
    PB_CHECK(check_keys(condition, path, {"caps", "arches", "minKernel"}));
    bool holds = true;
    if (condition.contains("caps")) {
      const auto& caps = condition["caps"];
      if (!caps.is_array()) return error(path + ".caps", "expected an array of strings");
      if (!caps.empty()) holds = false;  // the command has no capabilities
    }
    if (condition.contains("arches")) {
      const auto& arches = condition["arches"];
      if (!arches.is_array()) return error(path + ".arches", "expected an array of strings");
      bool native = arches.empty();
      for (std::size_t i = 0; i < arches.size(); ++i) {
        PB_TRY(arch, string_at(arches[i], path + ".arches[" + std::to_string(i) + "]"));
        native = native || is_native_arch(arch);
      }
      holds = holds && native;
    }
    if (condition.contains("minKernel")) {
      PB_TRY(version, string_at(condition["minKernel"], path + ".minKernel"));
      holds = holds && kernel_at_least(version);
    }
    return holds;
  }

  core::Result<Profile> parse(const json& root) {
    Profile profile;
    if (oci_) {
      PB_CHECK(check_keys(root, "",
                          {"defaultAction", "defaultErrnoRet", "architectures", "syscalls", "flags",
                           "listenerPath", "listenerMetadata"}));
      for (const char* agent_key : {"listenerPath", "listenerMetadata"}) {
        if (root.contains(agent_key)) {
          return error(agent_key,
                       "not supported: pulsebox oci runs no seccomp agents; remove it from the "
                       "config");
        }
      }
      if (root.contains("flags")) {
        PB_TRY(flags, flags_at(root["flags"], "flags"));
        profile.filter_flags = flags;
      }
    } else {
      PB_CHECK(check_keys(root, "",
                          {"defaultAction", "defaultErrnoRet", "architectures", "archMap",
                           "syscalls", "flags", "listenerPath", "listenerMetadata"}));
    }
    if (!root.contains("defaultAction")) return error("", "missing \"defaultAction\"");
    PB_TRY(default_action, action_at(root["defaultAction"], "defaultAction"));
    profile.default_action = default_action;
    if (root.contains("defaultErrnoRet")) {
      PB_TRY(number, errno_at(root["defaultErrnoRet"], "defaultErrnoRet"));
      profile.default_errno = number;
    }
    if (root.contains("architectures")) {
      const auto& arches = root["architectures"];
      if (!arches.is_array()) return error("architectures", "expected an array of strings");
      for (std::size_t i = 0; i < arches.size(); ++i) {
        const std::string path = "architectures[" + std::to_string(i) + "]";
        PB_TRY(arch, string_at(arches[i], path));
        if (std::find(std::begin(kArchitectures), std::end(kArchitectures), arch) ==
            std::end(kArchitectures)) {
          return error(path, "unknown architecture \"" + arch + "\"");
        }
        profile.architectures.push_back(arch);
      }
    }
    if (root.contains("syscalls")) {
      const auto& syscalls = root["syscalls"];
      if (!syscalls.is_array()) return error("syscalls", "expected an array");
      for (std::size_t i = 0; i < syscalls.size(); ++i) {
        const std::string path = "syscalls[" + std::to_string(i) + "]";
        PB_TRY(rule, parse_rule(syscalls[i], path));
        if (rule) profile.rules.push_back(std::move(*rule));
      }
    }
    return profile;
  }

  core::Result<std::uint32_t> flags_at(const json& value, const std::string& path) const {
    if (!value.is_array()) return error(path, "expected an array of strings");
    std::uint32_t flags = 0;
    for (std::size_t i = 0; i < value.size(); ++i) {
      const std::string item = path + "[" + std::to_string(i) + "]";
      PB_TRY(name, string_at(value[i], item));
      bool known = false;
      for (const auto& [flag_name, bit] : kFlags) {
        if (flag_name == name) {
          flags |= bit;
          known = true;
        }
      }
      if (!known) {
        std::string list;
        for (const auto& [flag_name, bit] : kFlags)
          list += (list.empty() ? "" : ", ") + std::string(flag_name);
        return error(item, "not supported: \"" + name +
                               "\" (pulsebox oci runs no seccomp "
                               "agents); use one of " +
                               list);
      }
    }
    return flags;
  }

  core::Result<std::optional<Rule>> parse_rule(const json& entry, const std::string& path) {
    if (oci_) {
      PB_CHECK(check_keys(entry, path, {"names", "action", "errnoRet", "args"}));
    } else {
      PB_CHECK(check_keys(
          entry, path,
          {"names", "name", "action", "errnoRet", "args", "comment", "includes", "excludes"}));
    }
    Rule rule;
    if (entry.contains("names")) {
      const auto& names = entry["names"];
      if (!names.is_array() || names.empty()) {
        return error(path + ".names", "expected a non-empty array of syscall names");
      }
      for (std::size_t i = 0; i < names.size(); ++i) {
        PB_TRY(name, string_at(names[i], path + ".names[" + std::to_string(i) + "]"));
        rule.names.push_back(name);
      }
    } else if (!oci_ && entry.contains("name")) {
      PB_TRY(name, string_at(entry["name"], path + ".name"));
      rule.names.push_back(name);
    } else {
      return error(path, "missing \"names\"");
    }
    if (!entry.contains("action")) return error(path, "missing \"action\"");
    PB_TRY(action, action_at(entry["action"], path + ".action"));
    rule.action = action;
    if (entry.contains("errnoRet")) {
      PB_TRY(number, errno_at(entry["errnoRet"], path + ".errnoRet"));
      rule.errno_ret = number;
    }
    if (entry.contains("comment")) {
      PB_TRY(comment, string_at(entry["comment"], path + ".comment"));
      rule.comment = comment;
    }
    if (entry.contains("args") && !entry["args"].is_null()) {
      const auto& args = entry["args"];
      if (!args.is_array()) return error(path + ".args", "expected an array");
      for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string arg_path = path + ".args[" + std::to_string(i) + "]";
        PB_CHECK(check_keys(args[i], arg_path, {"index", "value", "valueTwo", "op"}));
        ArgCheck check;
        if (!args[i].contains("index") || !args[i].contains("value") || !args[i].contains("op")) {
          return error(arg_path, "needs \"index\", \"value\" and \"op\"");
        }
        PB_TRY(index, u64_at(args[i]["index"], arg_path + ".index"));
        if (index > 5) return error(arg_path + ".index", "expected 0 to 5");
        check.index = static_cast<unsigned>(index);
        PB_TRY(value, u64_at(args[i]["value"], arg_path + ".value"));
        check.value = value;
        if (args[i].contains("valueTwo")) {
          PB_TRY(two, u64_at(args[i]["valueTwo"], arg_path + ".valueTwo"));
          check.value_two = two;
        }
        PB_TRY(op_text, string_at(args[i]["op"], arg_path + ".op"));
        bool known = false;
        for (const auto& [name, op] : kOps) {
          if (name == op_text) {
            check.op = op;
            known = true;
          }
        }
        if (!known) {
          return error(arg_path + ".op",
                       "expected SCMP_CMP_NE, _LT, _LE, _EQ, _GE, _GT or "
                       "_MASKED_EQ, got \"" +
                           op_text + "\"");
        }
        rule.args.push_back(check);
      }
    }
    bool applies = true;
    if (entry.contains("includes")) {
      PB_TRY(holds, condition_holds(entry["includes"], path + ".includes"));
      applies = holds;
    }
    if (entry.contains("excludes")) {
      // Excluded when every listed condition holds for this sandbox; an empty
      // caps list in excludes never matches (the command has none).
      const auto& excludes = entry["excludes"];
      PB_CHECK(check_keys(excludes, path + ".excludes", {"caps", "arches", "minKernel"}));
      if (excludes.contains("arches") && excludes["arches"].is_array()) {
        for (const auto& arch : excludes["arches"]) {
          if (arch.is_string() && is_native_arch(arch.get<std::string>())) applies = false;
        }
      }
    }
    if (!applies) return std::optional<Rule>();
    return std::optional<Rule>(std::move(rule));
  }

 private:
  std::string_view text_;
  std::string source_;
  bool oci_ = false;
};

}  // namespace

std::string_view to_string(Action action) {
  for (const auto& [name, value] : kActions) {
    if (value == action) return name;
  }
  return "?";
}

std::string_view to_string(ArgOp op) {
  for (const auto& [name, value] : kOps) {
    if (value == op) return name;
  }
  return "?";
}

std::vector<std::string> oci_action_names() {
  std::vector<std::string> names;
  for (const auto& [name, action] : kActions)
    names.emplace_back(name);
  return names;
}

std::vector<std::string> oci_operator_names() {
  std::vector<std::string> names;
  for (const auto& [name, op] : kOps)
    names.emplace_back(name);
  return names;
}

std::vector<std::string> oci_architecture_names() {
  return {std::begin(kArchitectures), std::end(kArchitectures)};
}

std::vector<std::string> oci_flag_names() {
  std::vector<std::string> names;
  for (const auto& [name, bit] : kFlags)
    names.emplace_back(name);
  return names;
}

core::Result<Profile> parse_profile(std::string_view text, const std::string& source,
                                    ParseOptions options) {
  PB_TRY(root, core::parse_json(text, source));
  try {
    Parser parser(text, source, options);
    PB_TRY(profile, parser.parse(root));
    profile.name = source;
    profile.text = std::string(text);
    return profile;
  } catch (const json::exception& e) {
    return Error(ErrorKind::kInvalidInput, "seccomp", source + ": " + e.what());
  }
}

const std::vector<std::string>& builtin_profile_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& [name, text] : builtin_profiles())
      out.emplace_back(name);
    return out;
  }();
  return names;
}

bool is_builtin_profile(std::string_view name) {
  for (const auto& [builtin, text] : builtin_profiles()) {
    if (builtin == name) return true;
  }
  return false;
}

core::Result<std::string> read_profile_text(const std::string& name_or_path) {
  for (const auto& [name, text] : builtin_profiles()) {
    if (name == name_or_path) return std::string(text);
  }
  std::error_code ec;
  if (!std::filesystem::exists(name_or_path, ec)) {
    std::string names;
    for (const auto& name : builtin_profile_names())
      names += (names.empty() ? "" : ", ") + name;
    return Error(ErrorKind::kInvalidInput, "io",
                 "seccomp profile \"" + name_or_path + "\": not a built-in profile (" + names +
                     ") and no such file");
  }
  return core::read_regular_file(name_or_path, kMaxProfileBytes, "seccomp profile");
}

core::Result<Profile> load_profile(const std::string& name_or_path) {
  if (is_builtin_profile(name_or_path)) {
    // Built-in profiles never change: parse each once per process.
    static std::mutex mutex;
    static std::map<std::string, Profile, std::less<>> parsed;
    std::lock_guard lock(mutex);
    if (auto it = parsed.find(name_or_path); it != parsed.end()) return it->second;
    PB_TRY(text, read_profile_text(name_or_path));
    PB_TRY(profile, parse_profile(text, name_or_path));
    return parsed.emplace(name_or_path, std::move(profile)).first->second;
  }
  PB_TRY(text, read_profile_text(name_or_path));
  return parse_profile(text, name_or_path);
}

}  // namespace pulsebox::seccomp
