// pulsebox changes | diff TX | commit TX | discard TX | reconcile  [-w DIR]
#include <unistd.h>

#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "policy/policy_json.h"
#include "pulsebox/backend.h"
#include "pulsebox/error.h"
#include "pulsebox/workspace.h"
#include "workspace/diff.h"

namespace pulsebox::cli {
namespace {

struct ChangesOptions {
  std::string workspace = ".";
  std::string transaction;
  std::string policy_file;
  bool json = false;
  bool allow_system_dir = false;
};

std::string summarize(const TransactionInfo& info) {
  std::map<std::string, int> counts;
  for (const auto& change : info.changes)
    ++counts[std::string(to_string(change.kind))];
  std::string out =
      std::to_string(info.changes.size()) + (info.changes.size() == 1 ? " change" : " changes");
  std::string detail;
  for (const auto& [kind, count] : counts) {
    if (!detail.empty()) detail += ", ";
    detail += std::to_string(count) + " " + kind;
  }
  return out + " (" + detail + ")";
}

nlohmann::json to_json(const TransactionInfo& info) {
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& change : info.changes) {
    nlohmann::json item = {{"kind", std::string(to_string(change.kind))}};
    core::put_name(item, "path", change.path);
    changes.push_back(std::move(item));
  }
  nlohmann::json out = {{"id", info.id},
                        {"created", info.created},
                        {"commit_in_progress", info.commit_in_progress},
                        {"staged_bytes", info.staged_bytes},
                        {"changes", std::move(changes)}};
  core::put_name(out, "origin", info.origin);
  return out;
}

// Runs `body` and turns library exceptions into one-line errors (exit 125).
// (The library quotes the names of the sandbox's choosing in its messages.)
template <class Body>
int guarded(Body&& body) {
  try {
    return body();
  } catch (const SandboxError& error) {
    print_error(error.what());
    return kExitUsage;
  }
}

Workspace open_workspace(const ChangesOptions& options) {
  const SystemDirectoryUse system_directory =
      options.allow_system_dir ? SystemDirectoryUse::Allow : SystemDirectoryUse::Refuse;
  if (options.policy_file.empty()) {
    return Workspace(options.workspace, default_workspace_policy(), WorkspaceLimits{},
                     system_directory);
  }
  auto loaded = policy::load_policy_file(options.policy_file);
  if (!loaded) throw SandboxConfigError(loaded.error().to_string());
  // A user policy starts from the workspace defaults: its rules come first.
  ActionPolicy policy = default_workspace_policy();
  const auto& rules = loaded->rules();
  for (auto it = rules.rbegin(); it != rules.rend(); ++it)
    policy.add_rule(*it);
  for (ActionType action : kAllActionTypes) {
    if (auto decision = loaded->default_for(action)) policy.set_default(action, *decision);
  }
  return Workspace(options.workspace, std::move(policy), WorkspaceLimits{}, system_directory);
}

int run_changes(const ChangesOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    const auto transactions = ws.list_transactions();
    if (options.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& info : transactions)
        out.push_back(to_json(info));
      std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return kExitOk;
    }
    if (transactions.empty()) {
      std::cout << "no pending transactions in " << ws.root().string() << "\n";
      return kExitOk;
    }
    const bool colour = stdout_is_colour_terminal();
    for (const auto& info : transactions) {
      std::cout << paint(info.id, Colour::Bold, colour) << "  " << info.created << "  "
                << summarize(info);
      if (info.commit_in_progress)
        std::cout << "  " << paint("[interrupted commit]", Colour::Red, colour);
      // The origin holds the command, whose arguments may be anything.
      if (!info.origin.empty()) std::cout << "  " << core::escape_for_terminal(info.origin);
      std::cout << "\n";
    }
    return kExitOk;
  });
}

int run_diff(const ChangesOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    const std::string diff = ws.diff(options.transaction, stdout_is_colour_terminal());
    // Piped, the diff stays byte for byte (`pulsebox diff TX | git apply`);
    // on a terminal, a file's own escape sequences must not act.
    if (::isatty(STDOUT_FILENO) == 1) {
      std::cout << workspace::escape_diff_for_terminal(diff);
    } else {
      std::cout << diff;
    }
    return kExitOk;
  });
}

int run_commit(const ChangesOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    const auto changed = ws.commit(options.transaction);
    std::cout << "committed " << options.transaction << ": " << changed.size()
              << (changed.size() == 1 ? " path" : " paths") << "\n";
    for (const auto& path : changed)
      std::cout << "  " << core::quote_name(path) << "\n";
    return kExitOk;
  });
}

int run_discard(const ChangesOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    ws.discard(options.transaction);
    std::cout << "discarded " << options.transaction << "\n";
    return kExitOk;
  });
}

int run_reconcile(const ChangesOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    const auto report = ws.reconcile();
    // The native backend's staging directories are per user, not per workspace.
    const std::vector<std::string> native = make_native_backend()->reconcile();
    if (options.json) {
      std::cout << nlohmann::json{{"replayed", report.replayed},
                                  {"removed_staging", report.removed_staging},
                                  {"removed_temp_files", report.removed_temp_files},
                                  {"removed_runs", report.removed_runs},
                                  {"native_backend", native}}
                       .dump()
                << "\n";
      return kExitOk;
    }
    for (const auto& what : native)
      std::cout << "removed " << what << "\n";
    for (const auto& id : report.replayed)
      std::cout << "finished interrupted commit " << id << "\n";
    for (const auto& id : report.removed_staging)
      std::cout << "removed incomplete staging " << id << "\n";
    for (const auto& id : report.removed_runs)
      std::cout << "removed leftovers of crashed run " << id << "\n";
    if (report.removed_temp_files > 0) {
      std::cout << "removed " << report.removed_temp_files << " temporary files\n";
    }
    if (report.replayed.empty() && report.removed_staging.empty() &&
        report.removed_temp_files == 0 && native.empty()) {
      std::cout << "nothing to reconcile in " << ws.root().string() << "\n";
    }
    return kExitOk;
  });
}

void add_workspace_option(CLI::App* command, ChangesOptions& options) {
  command->add_option("-w,--workspace", options.workspace, "Workspace directory (default: .)");
  command->add_flag("--allow-system-dir", options.allow_system_dir,
                    "Accept a system directory (/, /etc, /usr, a home directory itself, ...) as "
                    "the workspace");
}

}  // namespace

void register_changes_commands(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ChangesOptions>();

  CLI::App* changes = app.add_subcommand("changes", "List pending transactions");
  add_workspace_option(changes, *options);
  changes->add_flag("--json", options->json, "Print a JSON array");
  changes->callback([options, &exit_code] { exit_code = run_changes(*options); });

  CLI::App* diff = app.add_subcommand("diff", "Show a transaction as a unified diff");
  add_workspace_option(diff, *options);
  diff->add_option("TX", options->transaction, "Transaction id")->required();
  diff->callback([options, &exit_code] { exit_code = run_diff(*options); });

  CLI::App* commit = app.add_subcommand(
      "commit", "Apply a transaction atomically (exit 125 if the workspace changed underneath)");
  add_workspace_option(commit, *options);
  commit->add_option("--policy", options->policy_file, "Action policy JSON for the changed paths");
  commit->add_option("TX", options->transaction, "Transaction id")->required();
  commit->callback([options, &exit_code] { exit_code = run_commit(*options); });

  CLI::App* discard = app.add_subcommand("discard", "Drop a transaction");
  add_workspace_option(discard, *options);
  discard->add_option("TX", options->transaction, "Transaction id")->required();
  discard->callback([options, &exit_code] { exit_code = run_discard(*options); });

  CLI::App* reconcile = app.add_subcommand(
      "reconcile", "Finish interrupted commits and remove what crashed runs left");
  add_workspace_option(reconcile, *options);
  reconcile->add_flag("--json", options->json, "Print a JSON object");
  reconcile->callback([options, &exit_code] { exit_code = run_reconcile(*options); });
}

}  // namespace pulsebox::cli
