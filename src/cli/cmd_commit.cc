// pulsebox commit [-w DIR] [--json] [--allow-secrets] [--policy FILE] TX|latest [TX...] [--
// PATH...] pulsebox discard [-w DIR] [--json] TX|latest|HELD [...] [-- PATH...]
//
// Several ids are taken in order; the first refusal stops there (exit 125),
// saying which were done. Each decision is an audit record.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/review.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "pulsebox/session.h"
#include "pulsebox/workspace.h"

namespace pulsebox::cli {
namespace {

using review::Options;

// What became of one id.
struct Outcome {
  std::string id;
  std::string status;              // committed, discarded, refused, not_attempted, nothing_selected
  std::vector<std::string> paths;  // done; for a refusal, the paths it names
  std::size_t remaining = 0;       // changes still pending in the transaction
  std::string reason;              // refused: why
};

nlohmann::json to_json(const std::vector<Outcome>& outcomes) {
  nlohmann::json results = nlohmann::json::array();
  bool ok = true;
  for (const Outcome& outcome : outcomes) {
    nlohmann::json item = {{"id", outcome.id},
                           {"status", outcome.status},
                           {"paths", review::path_list(outcome.paths)},
                           {"remaining", outcome.remaining},
                           {"reason", nullptr}};
    if (outcome.status == "refused") {
      ok = false;
      core::put_name(item, "reason", outcome.reason);
    }
    results.push_back(std::move(item));
  }
  return {{"ok", ok}, {"results", std::move(results)}};
}

std::size_t pending_changes(const Workspace& ws, const std::string& id) {
  std::size_t count = 0;
  ws.for_each_transaction([&](TransactionInfo&& info) {
    if (info.id == id) count = info.changes.size();
  });
  return count;
}

// The path arguments that select something in `info` (all of them when none
// were given); every argument must select something in one of the ids.
std::vector<std::string> selection_for(const TransactionInfo& info,
                                       const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    if (review::unmatched({path}, info.changes).empty()) out.push_back(path);
  }
  return out;
}

void check_every_path_matches(const Workspace& ws, const std::vector<std::string>& ids,
                              const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  std::vector<StagedChange> all;
  for (const std::string& id : ids) {
    if (id.rfind("held-", 0) == 0) continue;
    const TransactionInfo info = ws.describe(id);
    all.insert(all.end(), info.changes.begin(), info.changes.end());
  }
  if (const auto missing = review::unmatched(paths, all); !missing.empty()) {
    throw SandboxConfigError("path argument " + core::quote_name(missing.front()) +
                             ": no change in " + (ids.size() == 1 ? ids.front() : "these ids") +
                             " is at or beneath it");
  }
}

// Prints the refusal for a person: which id, why (the library's message
// names the paths), and what was done before it and not attempted after.
void print_refusal(const std::string& verb, const std::string& done_verb,
                   const std::vector<Outcome>& outcomes) {
  std::string done;
  std::string skipped;
  const Outcome* refused = nullptr;
  for (const Outcome& outcome : outcomes) {
    if (outcome.status == "refused") {
      refused = &outcome;
    } else if (outcome.status == "not_attempted") {
      skipped += (skipped.empty() ? "" : ", ") + outcome.id;
    } else if (outcome.status != "nothing_selected") {
      done += (done.empty() ? "" : ", ") + outcome.id;
    }
  }
  if (refused == nullptr) return;
  std::string message = verb + " " + refused->id + " refused: " + refused->reason;
  if (!done.empty()) message += "\n(" + done_verb + " before it: " + done + ")";
  if (!skipped.empty()) message += "\n(not attempted: " + skipped + ")";
  print_error(message);
}

// Runs `act` for each id in order until one is refused.
template <class Act>
int for_each_id(const Options& options, const std::string& verb, const std::string& done_verb,
                Act&& act) {
  return review::guarded([&] {
    Workspace ws = review::open_workspace(options);
    const std::vector<std::string> paths = review::checked_paths(options.paths);
    std::vector<std::string> ids;
    // One transaction committed by id needs no check first: the commit's
    // own reading of its manifest refuses a missing or damaged one, and a
    // manifest of 100,000 entries is then parsed once instead of twice.
    // With more ids, every one is checked before any is committed.
    const bool checked_by_commit =
        verb == "commit" && options.ids.size() == 1 && options.ids[0] != "latest";
    for (const std::string& id : options.ids) {
      // Held ids are not transactions; the rest are checked (and "latest" resolved).
      if (id.rfind("held-", 0) == 0 || checked_by_commit) {
        ids.push_back(id);
      } else {
        for (std::string& resolved : review::resolve_ids(ws, {id}, verb == "discard"))
          if (std::find(ids.begin(), ids.end(), resolved) == ids.end())
            ids.push_back(std::move(resolved));
      }
    }
    for (const std::string& id : ids) {
      if (id.rfind("held-", 0) == 0 && !paths.empty()) {
        throw SandboxConfigError(id +
                                 ": held changes go whole; path arguments select changes "
                                 "of transactions only");
      }
    }
    check_every_path_matches(ws, ids, paths);
    review::Audit audit(ws, options);  // before anything is changed

    std::vector<Outcome> outcomes;
    bool stopped = false;
    for (const std::string& id : ids) {
      Outcome outcome{.id = id};
      if (stopped) {
        outcome.status = "not_attempted";
      } else {
        try {
          act(ws, audit, paths, outcome);
        } catch (const SandboxError& error) {
          outcome.status = "refused";
          outcome.reason = error.what();
          if (const auto* conflict =
                  dynamic_cast<const SandboxConcurrentModificationError*>(&error))
            outcome.paths = conflict->paths();
          audit.record(verb, id, false, error.what(), outcome.paths);
          stopped = true;
        }
      }
      if (!options.json && (outcome.status == "committed" || outcome.status == "discarded")) {
        std::cout << outcome.status << " " << id << ": " << outcome.paths.size()
                  << (outcome.paths.size() == 1 ? " path" : " paths");
        if (outcome.remaining > 0) {
          std::cout << " (" << outcome.remaining << " still pending in " << id << ")";
        }
        std::cout << "\n";
        for (const auto& path : outcome.paths)
          std::cout << "  " << core::quote_name(path) << "\n";
      } else if (!options.json && outcome.status == "nothing_selected") {
        std::cout << id << ": none of the paths given is in it; left as it is\n";
      }
      outcomes.push_back(std::move(outcome));
    }
    if (options.json) review::print_json(to_json(outcomes));
    if (!stopped) return kExitOk;
    if (!options.json) print_refusal(verb, done_verb, outcomes);
    return kExitUsage;
  });
}

}  // namespace

int run_commit(const Options& options) {
  return for_each_id(
      options, "commit", "committed",
      [&](Workspace& ws, review::Audit& audit, const std::vector<std::string>& paths,
          Outcome& outcome) {
        if (outcome.id.rfind("held-", 0) == 0) {
          throw SandboxConfigError(outcome.id +
                                   ": held changes are not a transaction; see `pulsebox changes`");
        }
        // describe() reads the whole manifest once more: only when its
        // answer is needed (a selection, or the audit's word on secrets).
        TransactionInfo info;
        if (!paths.empty() || options.allow_secrets) info = ws.describe(outcome.id);
        const std::vector<std::string> selected = selection_for(info, paths);
        if (!paths.empty() && selected.empty()) {
          outcome.status = "nothing_selected";
          return;
        }
        outcome.paths = ws.commit(
            outcome.id, CommitOptions{.paths = selected, .allow_secrets = options.allow_secrets});
        outcome.status = "committed";
        outcome.remaining = paths.empty() ? 0 : pending_changes(ws, outcome.id);
        std::string detail = "committed " + std::to_string(outcome.paths.size()) + " paths";
        if (outcome.remaining > 0) {
          detail += "; " + std::to_string(outcome.remaining) + " still pending";
        }
        if (options.allow_secrets && info.contains_secrets)
          detail += "; holds a registered secret value, allowed by --allow-secrets";
        audit.record("commit", outcome.id, true, detail, outcome.paths);
      });
}

int run_discard(const Options& options) {
  return for_each_id(
      options, "discard", "discarded",
      [&](Workspace& ws, review::Audit& audit, const std::vector<std::string>& paths,
          Outcome& outcome) {
        if (outcome.id.rfind("held-", 0) == 0) {
          discard_held(ws, outcome.id, review::kept_dir());
          outcome.status = "discarded";
          audit.record("discard", outcome.id, true, "discarded held changes");
          return;
        }
        TransactionInfo info;
        try {
          info = ws.describe(outcome.id);
        } catch (const SandboxError&) {
          if (!paths.empty()) throw;  // a damaged one goes whole
          ws.discard(outcome.id, {});
          outcome.status = "discarded";
          audit.record("discard", outcome.id, true, "discarded a damaged transaction");
          return;
        }
        const std::vector<std::string> selected = selection_for(info, paths);
        if (!paths.empty() && selected.empty()) {
          outcome.status = "nothing_selected";
          return;
        }
        for (const StagedChange& change : info.changes) {
          if (review::selects(selected, change.path)) outcome.paths.push_back(change.path);
        }
        ws.discard(outcome.id, selected);
        outcome.status = "discarded";
        outcome.remaining = paths.empty() ? 0 : pending_changes(ws, outcome.id);
        std::string detail = "discarded " + std::to_string(outcome.paths.size()) + " paths";
        if (outcome.remaining > 0) {
          detail += "; " + std::to_string(outcome.remaining) + " still pending";
        }
        audit.record("discard", outcome.id, true, detail, outcome.paths);
      });
}

}  // namespace pulsebox::cli
