#include <array>

#include "core/sandbox_home.h"
#include "pulsebox/secrets.h"

namespace pulsebox {

bool is_dangerous_environment_variable(std::string_view name) {
  // Variables that make a program load or run code chosen by whoever set them.
  static constexpr std::array<std::string_view, 28> kExact = {"BASH_ENV",
                                                              "ENV",
                                                              "PROMPT_COMMAND",
                                                              "IFS",
                                                              "SHELLOPTS",
                                                              "BASHOPTS",
                                                              "CDPATH",
                                                              "GLOBIGNORE",
                                                              "PYTHONPATH",
                                                              "PYTHONHOME",
                                                              "PYTHONSTARTUP",
                                                              "PYTHONUSERBASE",
                                                              "PERL5LIB",
                                                              "PERL5OPT",
                                                              "PERLLIB",
                                                              "RUBYLIB",
                                                              "RUBYOPT",
                                                              "NODE_OPTIONS",
                                                              "NODE_PATH",
                                                              "JAVA_TOOL_OPTIONS",
                                                              "_JAVA_OPTIONS",
                                                              "JDK_JAVA_OPTIONS",
                                                              "GCONV_PATH",
                                                              "HOSTALIASES",
                                                              "RESOLV_HOST_CONF",
                                                              "LOCALDOMAIN",
                                                              "TZDIR",
                                                              "NLSPATH"};
  static constexpr std::array<std::string_view, 4> kPrefixes = {"LD_", "DYLD_", "GIT_", "MALLOC_"};
  for (auto exact : kExact) {
    if (name == exact) return true;
  }
  for (auto prefix : kPrefixes) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return name.substr(0, 10) == "BASH_FUNC_";  // exported shell functions
}

std::map<std::string, std::string> build_sandbox_environment(
    const SecretPolicy& policy, const std::map<std::string, std::string>& host_environment,
    const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env = {
      {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
      // Outside the workspace: dotfiles and caches are no change of the project's.
      {"HOME", std::string(pulsebox::core::kSandboxHome)},
      {"TMPDIR", "/tmp"},
      {"LANG", "C.UTF-8"},
  };
  switch (policy.mode) {
    case SecretMode::DenyAll:
      break;
    case SecretMode::AllowExplicit:
      for (const std::string& name : policy.explicit_env) {
        if (auto it = host_environment.find(name); it != host_environment.end()) {
          env[name] = it->second;
        }
      }
      break;
    case SecretMode::AllowAll:
      for (const auto& [name, value] : host_environment)
        env[name] = value;
      break;
  }
  // Inherited variables that load code are dropped; explicit ones (`extra`,
  // --env) are the caller's own choice and pass (the facade audits their names).
  for (auto it = env.begin(); it != env.end();) {
    it = is_dangerous_environment_variable(it->first) ? env.erase(it) : std::next(it);
  }
  // Set after the filter (GIT_* from outside is refused): a read-only git
  // command (status, diff) would otherwise refresh .git/index with the
  // sandbox's stat data, a change the user never made.
  env.erase("GIT_OPTIONAL_LOCKS");
  env.emplace("GIT_OPTIONAL_LOCKS", "0");
  for (const auto& [name, value] : extra)
    env[name] = value;
  return env;
}

}  // namespace pulsebox
