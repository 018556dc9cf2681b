// pulsebox session list | show NAME | diff NAME | commit NAME | discard NAME  [-w DIR]
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/review.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "pulsebox/audit.h"
#include "pulsebox/error.h"
#include "pulsebox/session.h"
#include "pulsebox/workspace.h"

namespace pulsebox::cli {

int run_diff(const review::Options& options);

namespace {

// The review commands' options (the workspace, --json, --stat, ...) and the
// session's name.
struct SessionOptions : review::Options {
  std::string name;
};

using json = nlohmann::json;
using review::guarded;
using review::print_json;
using review::refused_json;

json to_json(const SessionInfo& info) {
  json out = {{"name", info.name},
              {"created", info.created},
              {"last_run", info.last_run},
              {"runs", info.runs},
              {"layers", info.layers.size()},
              {"committing", info.committing ? json(*info.committing) : json(nullptr)}};
  if (!info.damaged.empty()) out["damaged"] = info.damaged;
  return out;
}

Workspace open_workspace(const SessionOptions& options) {
  return review::open_workspace(options);
}

int run_list(const SessionOptions& options) {
  return guarded([&] {
    const Workspace ws = open_workspace(options);
    const auto sessions = list_sessions(ws, review::kept_dir());
    if (options.json) {
      json out = json::array();
      for (const auto& info : sessions)
        out.push_back(to_json(info));
      print_json(out);
      return kExitOk;
    }
    if (sessions.empty()) {
      std::cout << "no sessions in " << ws.root().string() << "\n";
      return kExitOk;
    }
    const bool colour = stdout_is_colour_terminal();
    for (const auto& info : sessions) {
      // A record's fields are read from .agent/, which a repository can ship.
      std::cout << paint(core::escape_for_terminal(info.name), Colour::Bold, colour) << "  ";
      if (!info.damaged.empty()) {
        std::cout << paint("[damaged]", Colour::Red, colour) << " "
                  << core::escape_for_terminal(info.damaged) << "\n";
        continue;
      }
      std::cout << info.runs << (info.runs == 1 ? " run" : " runs") << ", since "
                << core::escape_for_terminal(info.created);
      if (!info.last_run.empty())
        std::cout << ", last " << core::escape_for_terminal(info.last_run);
      if (info.committing) std::cout << "  " << paint("[interrupted commit]", Colour::Red, colour);
      std::cout << "\n";
    }
    return kExitOk;
  });
}

int run_show(const SessionOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    const auto kept = review::kept_dir();
    const SessionInfo info = describe_session(ws, options.name, kept);
    const review::SessionReview session_review(ws, options.name);
    TransactionInfo changes;
    if (session_review.transaction) changes = ws.describe(*session_review.transaction);
    if (options.json) {
      json out = to_json(info);
      json items = json::array();
      for (const auto& change : changes.changes) {
        json item = {{"kind", std::string(to_string(change.kind))}};
        core::put_name(item, "path", change.path);
        items.push_back(std::move(item));
      }
      out["changes"] = std::move(items);
      out["refused"] = refused_json(session_review.refused);
      print_json(out);
      return kExitOk;
    }
    std::cout << "session " << info.name << ": " << info.runs << " runs since "
              << core::escape_for_terminal(info.created) << ", " << changes.changes.size()
              << " changed paths\n";
    for (const auto& change : changes.changes) {
      std::cout << "  " << to_string(change.kind) << "  " << core::quote_name(change.path) << "\n";
    }
    for (const auto& item : session_review.refused) {
      std::cout << "  refused  " << core::quote_name(item.path) << ": " << item.reason << "\n";
    }
    return kExitOk;
  });
}

int run_commit(const SessionOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    CommitOptions commit;
    commit.allow_secrets = options.allow_secrets;
    review::Audit audit(ws, options);
    SessionCommitResult result;
    try {
      result = commit_session(ws, options.name, review::kept_dir(), commit);
    } catch (const SandboxError& error) {
      audit.record("session-commit", options.name, false, error.what());
      throw;
    }
    audit.record("session-commit", options.name, result.refused.empty(),
                 std::to_string(result.committed.size()) + " paths committed" +
                     (result.transaction ? " as " + *result.transaction : "") +
                     (result.refused.empty() ? ""
                                             : "; " + std::to_string(result.refused.size()) +
                                                   " refused, kept in the session"),
                 result.committed);
    if (options.json) {
      json committed = json::array();
      for (const auto& path : result.committed) {
        json item;
        core::put_name(item, "path", path);
        committed.push_back(std::move(item));
      }
      print_json({{"session", options.name},
                  {"transaction", result.transaction ? json(*result.transaction) : json(nullptr)},
                  {"committed", std::move(committed)},
                  {"refused", refused_json(result.refused)},
                  {"session_ended", result.refused.empty()}});
    } else {
      std::cout << "session " << options.name << ": committed " << result.committed.size()
                << (result.committed.size() == 1 ? " path" : " paths") << "\n";
      for (const auto& item : result.refused) {
        std::cout << "  not committed: " << core::quote_name(item.path) << ": " << item.reason
                  << "\n";
      }
      if (!result.refused.empty()) {
        std::cout << "the session stays, holding what was not committed\n";
      }
    }
    return result.refused.empty() ? kExitOk : kExitUsage;
  });
}

int run_discard(const SessionOptions& options) {
  return guarded([&] {
    Workspace ws = open_workspace(options);
    review::Audit audit(ws, options);
    discard_session(ws, options.name, review::kept_dir());
    audit.record("session-discard", options.name, true, "discarded the session");
    if (options.json) {
      print_json({{"session", options.name}, {"discarded", true}});
    } else {
      std::cout << "discarded session " << options.name << "\n";
    }
    return kExitOk;
  });
}

}  // namespace

void register_session_commands(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<SessionOptions>();
  CLI::App* session =
      app.add_subcommand("session", "Sessions: runs that build on each other (run --session)");
  session->require_subcommand(1);
  auto common = [&](CLI::App* command, bool named) {
    command->add_option("-w,--workspace", options->workspace,
                        "Workspace directory (default: the one holding .agent/ above, else .)");
    command->add_flag("--allow-system-dir", options->allow_system_dir,
                      "Allow a system directory as the workspace");
    command->add_flag("--json", options->json, "Print JSON");
    if (named) command->add_option("name", options->name, "Session name")->required();
  };
  CLI::App* list = session->add_subcommand("list", "The workspace's sessions");
  common(list, false);
  list->callback([options, &exit_code] { exit_code = run_list(*options); });

  CLI::App* show = session->add_subcommand("show", "A session and its net changes");
  common(show, true);
  show->callback([options, &exit_code] { exit_code = run_show(*options); });

  CLI::App* diff = session->add_subcommand("diff", "The session's net changes as a diff");
  common(diff, true);
  diff->add_flag("--stat", options->stat, "Lines added and removed per path");
  diff->add_flag("--name-only", options->name_only, "Only the changed paths");
  diff->add_option("paths", options->paths, "Only these paths (and beneath)");
  diff->add_flag("--all", options->all, "Show generated noise too (ignored paths, caches)");
  diff->callback([options, &exit_code] {
    // The same review as `pulsebox diff NAME`.
    review::Options review_options = *options;
    review_options.ids = {options->name};
    exit_code = run_diff(review_options);
  });

  CLI::App* commit =
      session->add_subcommand("commit", "Commit the session's net changes atomically");
  common(commit, true);
  commit->add_flag("--allow-secrets", options->allow_secrets,
                   "Commit even changes that hold a registered secret value");
  commit->callback([options, &exit_code] { exit_code = run_commit(*options); });

  CLI::App* discard = session->add_subcommand("discard", "Throw the session away");
  common(discard, true);
  discard->callback([options, &exit_code] { exit_code = run_discard(*options); });
}

}  // namespace pulsebox::cli
