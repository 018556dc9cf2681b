// Profiles and config files for `pulsebox run` (issue #19 item 4).
//
// Where a run's limits and policy come from, lowest first:
//   1. the built-in defaults (the reference's: the `agent` profile);
//   2. a profile: --profile NAME, else the user config's "profile"; `agent`
//      is built in, others are defined in the user's config file,
//      $XDG_CONFIG_HOME/pulsebox/config.json (else ~/.config/...):
//        {"profile": "mine",
//         "profiles": {"mine": {"memory": "4G", "pids": 512, "timeout": "120",
//                               "policy": "/home/me/policy.json"}}}
//   3. the flags;
//   4. the workspace's .pulsebox.json, which may only tighten: lower limits
//      and "rules" that deny or ask ({"memory": "512M", "rules": [...]}). It
//      is what the sandboxed command can write, so a value that would loosen
//      is an error naming its file and line.
// Every value is checked with the flags' own grammar; errors name the file,
// the line and the key.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "pulsebox/policy.h"
#include "run/run_command.h"

namespace pulsebox::config {

// One effective setting and where it came from ("default", "profile agent",
// "/home/me/.config/pulsebox/config.json:4 (profile mine)", "--memory",
// "/ws/.pulsebox.json:2").
struct Setting {
  std::string key;  // memory, swap, pids, cpus, timeout, cpu_time, max_output, policy
  std::string value;
  std::string source;
};

struct RunConfig {
  std::vector<Setting> settings;
  std::string profile;              // the profile in force
  std::filesystem::path user_file;  // "" when there is none
  std::filesystem::path workspace_file;
  // The workspace file's rules (deny or ask only), added last (they win).
  std::vector<PolicyRule> workspace_rules;
};

using Getenv = std::function<const char*(const std::string&)>;

// The user's config file: $XDG_CONFIG_HOME/pulsebox/config.json, else
// $HOME/.config/pulsebox/config.json; "" when neither variable is set.
std::filesystem::path user_config_path(const Getenv& getenv);

// Resolves the settings of a run with `options` (its flags) in `workspace`,
// and writes the effective values into `options` (empty fields filled from
// the profile; tightened by the workspace file). Throws SandboxConfigError
// naming the file and line, or the flag.
RunConfig apply_run_config(run::RunOptions& options, const std::filesystem::path& workspace,
                           const Getenv& getenv);

// The settings as text (one "key  value  (source)" line each) or JSON.
std::string describe(const RunConfig& config, bool json);

}  // namespace pulsebox::config
