// pulsebox changes [--json] [--all]
//   | reconcile [--json] [--oci-root DIR] [--accept-unsealed TX]...   [-w DIR]
// and the registration of every review command (diff: cmd_diff.cc;
// commit, discard: cmd_commit.cc). The shared parts are cli/review.h.
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/review.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "oci/commands/commands.h"
#include "oci/state_store.h"
#include "pulsebox/backend.h"
#include "pulsebox/session.h"
#include "pulsebox/workspace.h"

namespace pulsebox::cli {

int run_diff(const review::Options& options);
int run_commit(const review::Options& options);
int run_discard(const review::Options& options);

namespace {

using review::Options;

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

using review::refused_json;

nlohmann::json notes_json(const std::vector<ChangeNote>& notes) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& item : notes) {
    nlohmann::json entry = review::path_object(item.path);
    core::put_name(entry, "note", item.note);
    out.push_back(std::move(entry));
  }
  return out;
}

// One transaction as an element of `changes --json`'s array, its changes
// printed one at a time: a 100,000-change transaction was a document of
// 100,000 objects (three times the memory of its description) before.
void print_json_element(const TransactionInfo& info,
                        const std::vector<std::optional<workspace::ReviewGroup>>& groups) {
  nlohmann::json out = {{"id", info.id},
                        {"status", "pending"},
                        {"created", info.created},
                        {"commit_in_progress", info.commit_in_progress},
                        {"staged_bytes", info.staged_bytes},
                        {"contains_secrets", info.contains_secrets},
                        {"groups", review::groups_json(review::count_groups(groups))},
                        {"refused", refused_json(info.refused)},
                        {"notes", notes_json(info.notes)}};
  core::put_name(out, "origin", info.origin);
  review::JsonArrayPrinter changes(out, "changes", /*nested=*/true);
  for (std::size_t i = 0; i < info.changes.size(); ++i) {
    const auto& change = info.changes[i];
    nlohmann::json item = {{"kind", std::string(to_string(change.kind))},
                           {"group", review::group_json(groups[i])},
                           {"contains_secret", change.contains_secret}};
    core::put_name(item, "path", change.path);
    changes.add(item);
  }
  changes.finish();
}

// One transaction for a person: its summary line, then its paths (noise
// summarised per group unless --all), what was refused at import, the notes.
void print_transaction(const TransactionInfo& info,
                       const std::vector<std::optional<workspace::ReviewGroup>>& groups, bool all,
                       bool colour) {
  std::cout << paint(info.id, Colour::Bold, colour) << "  " << info.created << "  "
            << summarize(info);
  if (info.commit_in_progress)
    std::cout << "  " << paint("[interrupted commit]", Colour::Red, colour);
  if (info.contains_secrets) std::cout << "  " << paint("[holds a secret]", Colour::Red, colour);
  // The origin holds the command, whose arguments may be anything.
  if (!info.origin.empty()) std::cout << "  " << core::escape_for_terminal(info.origin);
  std::cout << "\n";
  for (std::size_t i = 0; i < info.changes.size(); ++i) {
    const auto& change = info.changes[i];
    if (groups[i] && !all) continue;
    std::string kind(to_string(change.kind));
    kind.resize(std::max<std::size_t>(kind.size(), 9), ' ');
    std::cout << "  " << kind << " " << core::quote_name(change.path);
    if (change.contains_secret) {
      std::cout << "  "
                << paint("secret: holds a registered secret value (commit needs --allow-secrets)",
                         Colour::Red, colour);
    }
    std::cout << "\n";
  }
  if (!all) {
    for (const auto& [group, count] : review::count_groups(groups))
      std::cout << "  " << workspace::group_summary(group, count) << "\n";
  }
  for (const auto& refused : info.refused) {
    std::cout << "  " << paint("refused", Colour::Red, colour) << " "
              << core::quote_name(refused.path) << ": " << core::escape_for_terminal(refused.reason)
              << "\n";
  }
  for (const auto& note : info.notes) {
    std::cout << "  note " << core::quote_name(note.path) << ": "
              << core::escape_for_terminal(note.note) << "\n";
  }
}

// Changes a run could not stage, kept on disk until discarded.
nlohmann::json held_json(const HeldChanges& held) {
  nlohmann::json out = {{"id", held.id},
                        {"status", "held"},
                        {"created", held.created},
                        {"reason", held.reason},
                        {"refused", refused_json(held.refused)},
                        {"transaction", held.transaction ? nlohmann::json(*held.transaction)
                                                         : nlohmann::json(nullptr)}};
  core::put_name(out, "location", held.location.string());
  core::put_name(out, "origin", held.origin);
  return out;
}

void print_held(const HeldChanges& held, bool colour) {
  // A record's fields are read from .agent/, which a repository can ship.
  const auto text = [](const std::string& field) { return core::escape_for_terminal(field); };
  std::cout << paint(text(held.id), Colour::Bold, colour) << "  " << text(held.created) << "  "
            << paint("held", Colour::Red, colour) << ": " << core::escape_for_terminal(held.reason);
  if (!held.origin.empty()) std::cout << "  " << core::escape_for_terminal(held.origin);
  std::cout << "\n";
  for (const auto& item : held.refused) {
    std::cout << "    " << core::quote_name(item.path) << ": "
              << core::escape_for_terminal(item.reason) << "\n";
  }
  if (held.transaction) std::cout << "    the rest is in " << text(*held.transaction) << "\n";
  std::cout << "    kept in " << core::quote_name(held.location.string())
            << " (drop with `pulsebox discard " << text(held.id) << "`)\n";
}

int run_changes(const Options& options) {
  return review::guarded([&] {
    Workspace ws = review::open_workspace(options);
    const std::vector<HeldChanges> held = list_held(ws);
    review::Grouping grouping(ws);
    const auto print_warnings = [&] {
      for (const std::string& warning : grouping.take_warnings())
        print_error("warning: " + warning + "; its paths are not grouped");
    };
    print_warnings();  // the workspace's own ignore rules, read already
    const bool colour = stdout_is_colour_terminal();
    // Each pending transaction printed as it is described, so that only one
    // description is held at a time; damaged ones and held changes after.
    // The JSON array opens with its first element: an error before any
    // (an unreadable .agent/transactions) leaves stdout empty.
    std::set<std::string> listed;
    std::vector<std::pair<std::string, std::string>> listed_damaged;
    std::size_t pending = 0;
    std::size_t json_elements = 0;
    const auto next_json_element = [&] { std::cout << (json_elements++ > 0 ? "," : "["); };
    ws.for_each_transaction([&](TransactionInfo&& info) {
      listed.insert(info.id);
      if (!info.damaged.empty()) {
        listed_damaged.emplace_back(info.id, info.damaged);
        return;
      }
      const auto groups = grouping.of(info);
      print_warnings();
      if (options.json) {
        next_json_element();
        print_json_element(info, groups);
      } else {
        print_transaction(info, groups, options.all, colour);
      }
      ++pending;
    });
    std::vector<std::pair<std::string, std::string>> damaged =
        review::damaged_transactions(ws, listed);
    damaged.insert(damaged.end(), listed_damaged.begin(), listed_damaged.end());

    if (options.json) {
      // One array: pending transactions, then damaged ones ("status" says
      // which), then held changes.
      for (const auto& [id, why] : damaged) {
        nlohmann::json item = {{"id", id}, {"status", "damaged"}};
        core::put_name(item, "reason", why);
        next_json_element();
        std::cout << review::one_line(item);
      }
      for (const auto& entry : held) {
        next_json_element();
        std::cout << review::one_line(held_json(entry));
      }
      if (json_elements == 0) std::cout << "[";
      std::cout << "]\n";
      return kExitOk;
    }
    if (pending == 0 && damaged.empty() && held.empty()) {
      std::cout << "no pending transactions in " << ws.root().string() << "\n";
      return kExitOk;
    }
    for (const auto& [id, why] : damaged) {
      std::cout << paint(id, Colour::Bold, colour) << "  " << paint("damaged", Colour::Red, colour)
                << ": " << core::escape_for_terminal(why) << " (only `pulsebox discard " << id
                << "` can remove it)\n";
    }
    for (const auto& entry : held)
      print_held(entry, colour);
    return kExitOk;
  });
}

// The OCI runtime's part of reconcile: its stopped containers and what
// crashed pulsebox-runc commands left, under `given` or the runtime's
// default --root. A default root that does not exist (or an ordinary user
// without $XDG_RUNTIME_DIR, who has none) has nothing to reconcile.
struct OciReconcile {
  std::string root;  // "": none here
  std::vector<std::string> removed;
  std::vector<std::string> problems;
};

OciReconcile reconcile_oci(const std::string& given) {
  OciReconcile result;
  std::filesystem::path root = given;
  if (root.empty()) {
    auto default_root = oci::StateStore::default_root();
    if (!default_root || !std::filesystem::is_directory(*default_root)) return result;
    root = *default_root;
  } else if (!std::filesystem::is_directory(root)) {
    result.problems.push_back("--oci-root " + given + ": not a directory");
    return result;
  }
  result.root = root.string();
  auto store = oci::StateStore::open(root);
  if (!store) {
    result.problems.push_back(store.error().to_string());
    return result;
  }
  result.removed = oci::commands::reconcile(*store, result.problems);
  return result;
}

int run_reconcile(const Options& options, const std::string& oci_root) {
  return review::guarded([&] {
    Workspace ws = review::open_workspace(options);
    review::Audit audit(ws, options);
    Workspace::ReconcileReport report;
    std::vector<std::string> native;
    try {
      report = ws.reconcile(options.ids);
      // The native backend's staging directories are per user, not per workspace.
      native = make_native_backend()->reconcile();
    } catch (const SandboxError& error) {
      audit.record("reconcile", ws.root().string(), false, error.what());
      throw;
    }
    std::string detail = "finished " + std::to_string(report.replayed.size()) +
                         " interrupted commits, removed " +
                         std::to_string(report.removed_staging.size()) + " incomplete stagings, " +
                         std::to_string(report.removed_runs.size()) + " crashed runs' leftovers, " +
                         std::to_string(report.removed_temp_files) + " temporary files, " +
                         std::to_string(native.size()) + " native backend leftovers";
    // Run after the workspace's part, so a workspace error stops before it.
    const OciReconcile oci_part = reconcile_oci(oci_root);
    if (!oci_part.root.empty())
      detail += ", " + std::to_string(oci_part.removed.size()) + " OCI containers";
    std::vector<std::string> what = report.replayed;
    what.insert(what.end(), report.removed_staging.begin(), report.removed_staging.end());
    what.insert(what.end(), report.removed_runs.begin(), report.removed_runs.end());
    audit.record("reconcile", ws.root().string(), true, detail, what);
    if (options.json) {
      std::cout << nlohmann::json{{"replayed", report.replayed},
                                  {"removed_staging", report.removed_staging},
                                  {"removed_temp_files", report.removed_temp_files},
                                  {"removed_runs", report.removed_runs},
                                  {"native_backend", native},
                                  {"oci", oci_part.root.empty()
                                              ? nlohmann::json(nullptr)
                                              : nlohmann::json{{"root", oci_part.root},
                                                               {"removed", oci_part.removed},
                                                               {"problems", oci_part.problems}}}}
                       .dump()
                << "\n";
      return oci_part.problems.empty() ? kExitOk : kExitUsage;
    }
    for (const auto& removed : native)
      std::cout << "removed " << removed << "\n";
    for (const auto& id : report.replayed)
      std::cout << "finished interrupted commit " << id << "\n";
    for (const auto& id : report.removed_staging)
      std::cout << "removed incomplete staging " << id << "\n";
    for (const auto& id : report.removed_runs)
      std::cout << "removed leftovers of crashed run " << id << "\n";
    if (report.removed_temp_files > 0) {
      std::cout << "removed " << report.removed_temp_files << " temporary files\n";
    }
    for (const auto& id : oci_part.removed)
      std::cout << "removed OCI container " << id << "\n";
    if (!oci_part.root.empty()) {
      std::cout << "removed " << oci_part.removed.size()
                << (oci_part.removed.size() == 1 ? " OCI container" : " OCI containers") << " from "
                << oci_part.root << "\n";
    }
    if (report.replayed.empty() && report.removed_staging.empty() &&
        report.removed_temp_files == 0 && native.empty() && oci_part.removed.empty()) {
      std::cout << "nothing to reconcile in " << ws.root().string() << "\n";
    }
    for (const auto& problem : oci_part.problems)
      print_error("OCI runtime: " + problem);
    return oci_part.problems.empty() ? kExitOk : kExitUsage;
  });
}

void add_workspace_option(CLI::App* command, Options& options) {
  command->add_option("-w,--workspace", options.workspace,
                      "Workspace directory (default: the one holding .agent/ above, else .)");
  command->add_flag("--allow-system-dir", options.allow_system_dir,
                    "Accept a system directory (/, /etc, /usr, a home directory itself, ...) as "
                    "the workspace");
}

void add_audit_options(CLI::App* command, Options& options) {
  command->add_option("--audit-log", options.audit_log,
                      "Audit log (default <workspace>/.agent/logs/audit.jsonl, as for run)");
  command->add_option("--audit-key", options.audit_key,
                      "The audit log's HMAC key (default $PULSEBOX_AUDIT_KEY, else "
                      "~/.local/state/pulsebox/audit.key)");
}

}  // namespace

void register_changes_commands(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<Options>();
  // The paths after "--" (main.cc takes them off the command line).
  auto with_paths = [options](int (*run)(const Options&)) {
    return [options, run]() {
      options->paths = arguments_after_dashes();
      return run(*options);
    };
  };

  CLI::App* changes = app.add_subcommand(
      "changes", "List pending transactions, their paths, refusals, notes and secrets");
  add_workspace_option(changes, *options);
  changes->add_flag("--json", options->json, "Print a JSON array");
  changes->add_flag("--all", options->all,
                    "List ignored paths, caches and .git/ internals one by one");
  changes->callback([options, &exit_code] { exit_code = run_changes(*options); });

  CLI::App* diff = app.add_subcommand(
      "diff", "Show a transaction against its own base: pulsebox diff [TX|latest] [-- PATH...]");
  add_workspace_option(diff, *options);
  diff->add_option("TX", options->ids, "Transaction id or `latest` (default: latest)")
      ->expected(0, 1);
  diff->add_flag("--stat", options->stat, "Lines added and removed per path");
  diff->add_flag("--name-only", options->name_only, "Only the changed paths");
  diff->add_flag("--json", options->json, "Print a JSON object, one entry per path");
  diff->add_flag("--all", options->all, "Show ignored paths, caches and .git/ internals too");
  diff->callback([run = with_paths(run_diff), &exit_code] { exit_code = run(); });

  CLI::App* commit = app.add_subcommand(
      "commit",
      "Apply transactions atomically, in order: pulsebox commit TX|latest [TX...] [-- PATH...] "
      "(exit 125 at the first refusal)");
  add_workspace_option(commit, *options);
  add_audit_options(commit, *options);
  commit->add_option("--policy", options->policy_file, "Action policy JSON for the changed paths");
  commit->add_flag("--json", options->json, "Print a JSON object: what each id became");
  commit->add_flag("--allow-secrets", options->allow_secrets,
                   "Commit changes that hold a registered secret value");
  commit->add_option("TX", options->ids, "Transaction ids or `latest`")->required();
  commit->callback([run = with_paths(run_commit), &exit_code] { exit_code = run(); });

  CLI::App* discard = app.add_subcommand(
      "discard",
      "Drop transactions or held changes: pulsebox discard TX|latest|HELD [...] [-- PATH...]");
  add_workspace_option(discard, *options);
  add_audit_options(discard, *options);
  discard->add_flag("--json", options->json, "Print a JSON object: what each id became");
  discard->add_option("TX", options->ids, "Transaction ids, `latest` or held ids")->required();
  discard->callback([run = with_paths(run_discard), &exit_code] { exit_code = run(); });

  CLI::App* reconcile = app.add_subcommand(
      "reconcile", "Finish interrupted commits and remove what crashed runs left");
  add_workspace_option(reconcile, *options);
  add_audit_options(reconcile, *options);
  reconcile->add_flag("--json", options->json, "Print a JSON object");
  reconcile->add_option("--accept-unsealed", options->ids,
                        "Finish this interrupted commit as logged although its commit point "
                        "carries no seal of this user's key (decided as another user, with "
                        "another audit key, or by an older pulsebox); repeatable");
  auto oci_root = std::make_shared<std::string>();
  reconcile->add_option("--oci-root", *oci_root,
                        "The OCI runtime's state directory to reconcile too (default its "
                        "--root: /run/pulsebox-oci, or $XDG_RUNTIME_DIR/pulsebox-oci)");
  reconcile->callback(
      [options, oci_root, &exit_code] { exit_code = run_reconcile(*options, *oci_root); });
}

}  // namespace pulsebox::cli
