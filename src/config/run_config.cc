// Profiles and config files for `pulsebox run` (run_config.h).
#include "config/run_config.h"

#include <sys/resource.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/json_parse.h"
#include "policy/policy_json.h"
#include "pulsebox/error.h"
#include "pulsebox/limits.h"

namespace pulsebox::config {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint64_t kMaxConfigBytes = 1ull << 20;
constexpr const char* kWorkspaceFile = ".pulsebox.json";

[[noreturn]] void bad_input(const std::string& message) {
  throw SandboxConfigError(message, 0, "config");
}

// The limits a profile or the workspace file may set, their flags, and the
// values the run has when nothing sets them (the reference's defaults).
struct Key {
  const char* name;
  const char* flag;
  const char* default_value;  // "" for none (no limit, or no policy file)
  std::string run::RunOptions::*field;
};
constexpr double kNoLimit = std::numeric_limits<double>::infinity();

const std::vector<Key>& limit_keys() {
  static const std::vector<Key> keys = {
      {"memory", "--memory", "1G", &run::RunOptions::memory},
      {"swap", "--swap", "1G", &run::RunOptions::swap},
      {"pids", "--pids", "64", &run::RunOptions::pids},
      {"cpus", "--cpus", "1", &run::RunOptions::cpus},
      {"timeout", "--timeout", "30", &run::RunOptions::timeout},
      {"cpu_time", "--cpu-time", "", &run::RunOptions::cpu_time},
      {"max_output", "--max-output", "5M", &run::RunOptions::max_output},
  };
  return keys;
}
const Key kPolicyKey = {"policy", "--policy", "", &run::RunOptions::policy_file};

// The built-in `ci` profile: a build or a test suite, not one agent
// command: no wall-clock limit, output cut at 64 MiB rather than the run
// killed, threads of a parallel test runner, more memory and files.
const std::vector<std::pair<std::string, std::string>> kCiProfile = {
    {"memory", "4G"}, {"pids", "4096"}, {"timeout", "none"}, {"max_output", "64M"}};

ResourcePolicy ci_limits() {
  ResourcePolicy limits;
  limits.memory_bytes = 4ull << 30;
  limits.max_processes = 4096;
  limits.wall_time_seconds = kNoWallTimeLimit;
  limits.max_output_bytes = 64ull << 20;
  limits.stop_at_output_limit = false;
  // A CI job's sanitizer builds must run: no per-process memory rlimit where
  // no cgroup holds memory (reported as not enforced).
  limits.memory_rlimit_fallback = false;
  // As many files as this process may give (raising the hard limit needs
  // CAP_SYS_RESOURCE).
  struct rlimit files {};
  limits.max_open_files = 4096;
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_max < limits.max_open_files) {
    limits.max_open_files = files.rlim_max;
  }
  return limits;
}

const Key* find_key(const std::string& name, bool with_policy) {
  for (const Key& key : limit_keys())
    if (name == key.name) return &key;
  if (with_policy && name == kPolicyKey.name) return &kPolicyKey;
  return nullptr;
}

// The line of each object key, by its path ("/profiles/mine/memory"): the
// JSON library keeps no positions, so the text is scanned once more.
std::map<std::string, int> key_lines(std::string_view text) {
  std::map<std::string, int> lines;
  std::vector<std::string> path;
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '{' || c == '[') {
      path.emplace_back();
    } else if ((c == '}' || c == ']') && !path.empty()) {
      path.pop_back();
    } else if (c == '"') {
      std::string word;
      const int at = line;
      std::size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\') ++j;
        if (j < text.size()) word.push_back(text[j]);
      }
      i = j;
      std::size_t k = j + 1;
      while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k])))
        ++k;
      if (k < text.size() && text[k] == ':' && !path.empty()) {
        path.back() = word;
        std::string joined;
        for (const auto& part : path)
          joined += "/" + part;
        lines.emplace(joined, at);
      }
    }
  }
  return lines;
}

// A parsed config file: its values and where each key is.
struct Document {
  fs::path file;
  json value;
  std::map<std::string, int> lines;

  std::string where(const std::string& path) const {
    const auto it = lines.find(path);
    return file.string() + (it == lines.end() ? "" : ":" + std::to_string(it->second));
  }
};

Document load(const fs::path& file, const char* what) {
  auto text = core::read_regular_file(file, kMaxConfigBytes, what);
  if (!text) bad_input(text.error().to_string());
  auto parsed = core::parse_json(*text, file.string());
  if (!parsed) bad_input(parsed.error().to_string());
  if (!parsed->is_object()) bad_input(file.string() + ":1: expected a JSON object");
  return {file, std::move(parsed).value(), key_lines(*text)};
}

// A value as the flag would take it: a string, or a number written out.
std::string value_text(const Document& doc, const std::string& path, const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_unsigned()) return std::to_string(value.get<std::uint64_t>());
  if (value.is_number_float()) return value.dump();
  bad_input(doc.where(path) + ": " + path.substr(path.rfind('/') + 1) +
            ": expected a string or a number, got " + std::string(value.type_name()));
}

// The value's size in the flag's grammar, for comparisons (none: no limit).
double magnitude(const Key& key, const std::string& text, const std::string& what) {
  const std::string name = key.name;
  if (text.empty()) return kNoLimit;
  if (name == "memory") return static_cast<double>(parse_size(text, what));
  // Optional limits: "none" (and a duration of 0) is no limit, the loosest;
  // a swap of 0 is no swap, the tightest.
  if (name == "swap" || name == "max_output") {
    const auto bytes = parse_size_limit(text, what);
    return bytes ? static_cast<double>(*bytes) : kNoLimit;
  }
  if (name == "timeout" || name == "cpu_time") {
    return parse_duration_limit(text, what).value_or(kNoLimit);
  }
  std::size_t used = 0;
  double number = 0;
  try {
    number = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const bool whole = name != "pids" || number == std::floor(number);
  if (used != text.size() || !(number > 0) || !whole || (name == "cpus" && number > 4096)) {
    bad_input(what + ": \"" + text + "\" is not valid (expected " +
              (name == "pids" ? "a whole number greater than zero"
                              : "a number of CPUs such as 1 "
                                "or 0.5") +
              ")");
  }
  return number;
}

// The profile's values (checked), each with its line.
std::vector<Setting> read_profile(const Document& doc, const std::string& name) {
  const std::string path = "/profiles/" + name;
  const json& profile = doc.value["profiles"][name];
  if (!profile.is_object())
    bad_input(doc.where(path) + ": profile " + name + ": expected an object");
  std::vector<Setting> settings;
  for (const auto& [key_name, item] : profile.items()) {
    const std::string item_path = path + "/" + key_name;
    const Key* key = find_key(key_name, true);
    if (key == nullptr) {
      bad_input(doc.where(item_path) + ": \"" + key_name +
                "\": not a profile setting (memory, swap, pids, cpus, timeout, cpu_time, "
                "max_output, policy)");
    }
    const std::string text = value_text(doc, item_path, item);
    const std::string where = doc.where(item_path);
    if (key != &kPolicyKey) (void)magnitude(*key, text, where + ": " + key_name);
    settings.push_back({key_name, text, where + " (profile " + name + ")"});
  }
  return settings;
}

void check_user_file(const Document& doc) {
  for (const auto& [name, item] : doc.value.items()) {
    if (name != "profile" && name != "profiles") {
      bad_input(doc.where("/" + name) + ": \"" + name +
                "\": unknown key (expected \"profile\" and \"profiles\")");
    }
  }
  if (doc.value.contains("profile") && !doc.value["profile"].is_string()) {
    bad_input(doc.where("/profile") + ": profile: expected the name of a profile");
  }
  if (doc.value.contains("profiles") && !doc.value["profiles"].is_object()) {
    bad_input(doc.where("/profiles") + ": profiles: expected an object of named profiles");
  }
}

}  // namespace

fs::path user_config_path(const Getenv& getenv) {
  if (const char* xdg = getenv("XDG_CONFIG_HOME"); xdg != nullptr && xdg[0] == '/') {
    return fs::path(xdg) / "pulsebox/config.json";
  }
  if (const char* home = getenv("HOME"); home != nullptr && home[0] == '/') {
    return fs::path(home) / ".config/pulsebox/config.json";
  }
  return {};
}

RunConfig apply_run_config(run::RunOptions& o, const fs::path& workspace, const Getenv& getenv) {
  RunConfig config;
  std::error_code ec;
  std::optional<Document> user;
  if (const fs::path file = user_config_path(getenv); !file.empty() && fs::exists(file, ec)) {
    user = load(file, "config file");
    check_user_file(*user);
    config.user_file = file;
  }

  // The profile: the flag's, else the user file's, else agent.
  std::string origin = "--profile";
  config.profile = o.profile;
  if (config.profile.empty() && user && user->value.contains("profile")) {
    config.profile = user->value["profile"].get<std::string>();
    origin = user->where("/profile");
  }
  if (config.profile.empty()) config.profile = "agent";
  std::vector<Setting> from_profile;
  const bool built_in_ci = config.profile == "ci" && !(user && user->value.contains("profiles") &&
                                                       user->value["profiles"].contains("ci"));
  if (built_in_ci) {
    for (const auto& [key, value] : kCiProfile)
      from_profile.push_back({key, value, "profile ci (built in, a default)"});
  } else if (config.profile != "agent") {
    const bool defined = user && user->value.contains("profiles") &&
                         user->value["profiles"].contains(config.profile);
    if (!defined) {
      std::string known = "agent, ci (built in)";
      if (user && user->value.contains("profiles")) {
        for (const auto& [name, item] : user->value["profiles"].items())
          known += ", " + name;
      }
      const fs::path file = user ? user->file : user_config_path(getenv);
      bad_input(origin + ": no profile \"" + config.profile + "\" (known: " + known +
                "; define others in " +
                (file.empty() ? "$XDG_CONFIG_HOME/pulsebox/config.json" : file.string()) + ")");
    }
    from_profile = read_profile(*user, config.profile);
  }

  // Flags win over the profile, the profile over the defaults.
  std::vector<Key> keys = limit_keys();
  keys.push_back(kPolicyKey);
  for (const Key& key : keys) {
    std::string& field = o.*key.field;
    Setting setting{key.name, key.default_value,
                    config.profile == "agent" ? "default (profile agent)" : "default"};
    if (!field.empty()) {
      setting = {key.name, field, key.flag};
    } else {
      for (const Setting& value : from_profile) {
        if (value.key != key.name) continue;
        setting = value;
        // A built-in profile's values are defaults (base_limits), not
        // limits the user asked to be enforced strongly.
        if (!built_in_ci) field = value.value;
      }
    }
    config.settings.push_back(setting);
  }
  if (built_in_ci) o.base_limits = ci_limits();

  // The workspace's file may only tighten.
  const fs::path file = workspace / kWorkspaceFile;
  if (fs::is_symlink(file, ec)) {
    bad_input(file.string() + ": a symbolic link; the workspace's config must be a regular file");
  }
  if (!fs::exists(file, ec)) return config;
  const Document doc = load(file, "workspace config file");
  config.workspace_file = file;
  for (const auto& [name, item] : doc.value.items()) {
    const std::string path = "/" + name;
    const std::string where = doc.where(path);
    if (name == "rules") {
      auto rules = policy::parse_policy_json(json{{"rules", item}}.dump(), where);
      if (!rules) bad_input(rules.error().to_string());
      for (const PolicyRule& rule : rules->rules()) {
        if (rule.decision == Decision::Allow) {
          bad_input(where + ": rules: a rule that allows (\"" + rule.target_pattern +
                    "\") would loosen the policy; a workspace file may only deny or ask");
        }
      }
      // rules() is newest first; add_rule puts each in front again.
      for (auto it = rules->rules().rbegin(); it != rules->rules().rend(); ++it)
        config.workspace_rules.push_back(*it);
      continue;
    }
    const Key* key = find_key(name, false);
    if (key == nullptr) {
      bad_input(where + ": \"" + name +
                "\": not a workspace setting (memory, swap, pids, cpus, timeout, cpu_time, "
                "max_output, rules)");
    }
    const std::string text = value_text(doc, path, item);
    const double wanted = magnitude(*key, text, where + ": " + name);
    for (Setting& setting : config.settings) {
      if (setting.key != name) continue;
      if (wanted > magnitude(*key, setting.value, setting.source)) {
        bad_input(where + ": " + name + " " + text + " would loosen " +
                  (setting.value.empty() ? "the run's" : setting.value) + " (from " +
                  setting.source +
                  "); a file in the workspace may only tighten limits, remove the line or lower "
                  "it");
      }
      setting = {name, text, where + " (workspace)"};
      o.*key->field = text;
    }
  }
  return config;
}

std::string describe(const RunConfig& config, bool as_json) {
  if (as_json) {
    json out = {{"profile", config.profile},
                {"user_config", config.user_file.string()},
                {"workspace_config", config.workspace_file.string()},
                {"settings", json::object()}};
    for (const Setting& setting : config.settings) {
      out["settings"][setting.key] = {
          {"value", setting.value.empty() ? json(nullptr) : json(setting.value)},
          {"source", setting.source}};
    }
    out["workspace_rules"] = json::array();
    for (const PolicyRule& rule : config.workspace_rules) {
      out["workspace_rules"].push_back(
          {{"action", rule.action ? std::string(to_string(*rule.action)) : "*"},
           {"target", rule.target_pattern},
           {"decision", std::string(to_string(rule.decision))},
           {"reason", rule.reason}});
    }
    return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  }
  std::string text = "profile " + config.profile + "\n";
  text += "user config: " +
          (config.user_file.empty() ? std::string("(none)") : config.user_file.string()) + "\n";
  text += "workspace config: " +
          (config.workspace_file.empty() ? std::string("(none)") : config.workspace_file.string()) +
          "\n";
  for (const Setting& setting : config.settings) {
    std::string value = setting.value.empty() ? "none" : setting.value;
    text += "  " + setting.key + std::string(12 - setting.key.size(), ' ') + value +
            std::string(value.size() < 10 ? 10 - value.size() : 1, ' ') + setting.source + "\n";
  }
  for (const PolicyRule& rule : config.workspace_rules) {
    text += "  rule        " + std::string(to_string(rule.decision)) + " " +
            (rule.action ? std::string(to_string(*rule.action)) : "*") + " \"" +
            rule.target_pattern + "\"  " + config.workspace_file.string() + " (workspace)\n";
  }
  return text;
}

}  // namespace pulsebox::config
