// pulsebox diff [-w DIR] [TX|SESSION|latest] [--stat|--name-only] [--json] [--all] [-- PATH...]

#include <cstdint>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/review.h"
#include "cli/whole_output.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "pulsebox/error.h"
#include "pulsebox/session.h"
#include "pulsebox/workspace.h"
#include "workspace/diff.h"

namespace pulsebox::cli {
namespace {

using review::Options;

// On a terminal a file's own escape sequences must not act; piped, the
// diff stays byte for byte (`pulsebox diff TX | git apply`).
void print_diff_text(WholeOutput& out, std::string_view text) {
  if (out.to_terminal()) {
    out.write(workspace::escape_diff_for_terminal(text));
  } else {
    out.write(text);
  }
}

// Where each path that Workspace::diff or diff_stat hands out stands in the
// description's changes: both come in path order, so one pass finds them
// all, and nothing is held by path.
class ChangeCursor {
 public:
  explicit ChangeCursor(const std::vector<StagedChange>& changes) : changes_(changes) {}
  // nullopt: a path the description did not have (the transaction changed
  // between the two readings).
  std::optional<std::size_t> index_of(const std::string& path) {
    while (next_ < changes_.size() && changes_[next_].path < path)
      ++next_;
    if (next_ < changes_.size() && changes_[next_].path == path) return next_++;
    return std::nullopt;
  }

 private:
  const std::vector<StagedChange>& changes_;
  std::size_t next_ = 0;
};

// What --json says of a path's content before the change, where a
// registered secret value was checked for: "redacted" (it held one),
// "withheld" (it could not be checked: not shown), null.
nlohmann::json before_secret_json(const StagedChange& change) {
  if (change.before_redacted) return "redacted";
  if (change.before_withheld) return "withheld";
  return nullptr;
}

// A DiffStat without its path and kind (the description has both): 24
// bytes a change where the DiffStat took 96, held for every change of the
// transaction while --stat or --json prints.
struct PathCounts {
  std::uint64_t added_lines = 0;
  std::uint64_t removed_lines = 0;
  bool binary = false;
  enum class Unread : std::uint8_t { None, Before, After, Both } not_shown = Unread::None;
};

PathCounts::Unread unread_side(const std::string& not_shown) {
  if (not_shown.empty()) return PathCounts::Unread::None;
  if (not_shown == "before") return PathCounts::Unread::Before;
  if (not_shown == "after") return PathCounts::Unread::After;
  if (not_shown == "both") return PathCounts::Unread::Both;
  throw SandboxError("internal: a diff side named \"" + not_shown + "\" is not shown");
}

// DiffStat::not_shown's words: "before", "after", "both", else empty.
const char* unread_name(PathCounts::Unread side) {
  switch (side) {
    case PathCounts::Unread::Before:
      return "before";
    case PathCounts::Unread::After:
      return "after";
    case PathCounts::Unread::Both:
      return "both";
    case PathCounts::Unread::None:
      break;
  }
  return "";
}

// Each selected change's line counts, by its index in info.changes. Read
// entry by entry: a map of them by path held every path of a 100,000-file
// transaction twice more, beside the entries.
std::vector<PathCounts> counts_by_index(const Workspace& ws, const TransactionInfo& info,
                                        const std::vector<std::string>& paths) {
  std::vector<PathCounts> counts(info.changes.size());
  ChangeCursor cursor(info.changes);
  ws.diff_stat(info.id, paths, [&](DiffStat&& stat) {
    const auto index = cursor.index_of(stat.path);
    if (!index) {
      throw SandboxError("transaction " + info.id + " changed while it was read (" +
                         core::quote_name(stat.path) + " was not in it); run the command again");
    }
    counts[*index] = PathCounts{.added_lines = stat.added_lines,
                                .removed_lines = stat.removed_lines,
                                .binary = stat.binary,
                                .not_shown = unread_side(stat.not_shown)};
  });
  return counts;
}

}  // namespace

int run_diff(const Options& options) {
  return review::guarded([&] {
    if (options.stat && options.name_only) {
      throw SandboxConfigError("--stat and --name-only: choose one");
    }
    Workspace ws = review::open_workspace(options);
    // A session is reviewed as the transaction its commit would make, for
    // the time of the review.
    std::optional<review::SessionReview> session;
    if (options.ids.size() == 1 && options.ids[0] != "latest" &&
        !options.ids[0].starts_with("tx-")) {
      session.emplace(ws, options.ids[0]);
      for (const auto& item : session->refused) {
        print_error("not committable: " + core::quote_name(item.path) + ": " + item.reason);
      }
      if (!session->transaction) {
        if (options.json) {
          review::print_json({{"session", options.ids[0]},
                              {"paths", nlohmann::json::array()},
                              {"refused", review::refused_json(session->refused)}});
        } else {
          std::cout << "session " << options.ids[0] << " changed nothing\n";
        }
        return kExitOk;
      }
    }
    const std::string id =
        session ? *session->transaction
                : review::resolve_ids(
                      ws, options.ids.empty() ? std::vector<std::string>{"latest"} : options.ids)
                      .front();
    const std::vector<std::string> paths = review::checked_paths(options.paths);
    const TransactionInfo info = ws.describe(id);
    if (const auto missing = review::unmatched(paths, info.changes); !missing.empty()) {
      throw SandboxConfigError("path argument " + core::quote_name(missing.front()) +
                               ": no change in " + id + " is at or beneath it");
    }
    review::Grouping grouping(ws);
    const auto groups = grouping.of(info);
    for (const std::string& warning : grouping.take_warnings())
      print_error("warning: " + warning + "; its paths are not grouped");

    // What is shown: the selected paths, without the grouped ones unless --all.
    std::vector<bool> selected(info.changes.size());
    std::vector<bool> shown(info.changes.size());
    std::vector<std::optional<workspace::ReviewGroup>> selected_groups;
    for (std::size_t i = 0; i < info.changes.size(); ++i) {
      selected[i] = review::selects(paths, info.changes[i].path);
      shown[i] = selected[i] && (options.all || !groups[i]);
      if (selected[i]) selected_groups.push_back(groups[i]);
    }
    const auto group_counts = review::count_groups(selected_groups);
    std::vector<std::string> summaries;
    if (!options.all) {
      for (const auto& [group, count] : group_counts)
        summaries.push_back(workspace::group_summary(group, count));
    }

    if (options.json) {
      const std::vector<PathCounts> counts = counts_by_index(ws, info, paths);
      nlohmann::json out = {{"id", info.id},
                            {"created", info.created},
                            {"contains_secrets", info.contains_secrets},
                            {"groups", review::groups_json(group_counts)}};
      core::put_name(out, "origin", info.origin);
      // One entry per path, printed as it is made: a large transaction's
      // entries are never all held as JSON. "paths" sorts after every other
      // key, so the text is the one document print_json would print.
      review::JsonArrayPrinter entries(out, "paths");
      for (std::size_t i = 0; i < info.changes.size(); ++i) {
        if (!selected[i]) continue;
        const StagedChange& change = info.changes[i];
        const PathCounts& stat = counts[i];
        nlohmann::json item = {{"kind", std::string(to_string(change.kind))},
                               {"added_lines", stat.added_lines},
                               {"removed_lines", stat.removed_lines},
                               {"binary", stat.binary},
                               {"not_shown", stat.not_shown == PathCounts::Unread::None
                                                 ? nlohmann::json(nullptr)
                                                 : nlohmann::json(unread_name(stat.not_shown))},
                               {"group", review::group_json(groups[i])},
                               {"contains_secret", change.contains_secret},
                               {"before_secret", before_secret_json(change)}};
        core::put_name(item, "path", change.path);
        entries.add(item);
      }
      entries.finish();
      return kExitOk;
    }

    if (options.name_only) {
      for (std::size_t i = 0; i < info.changes.size(); ++i) {
        if (shown[i]) std::cout << core::quote_name(info.changes[i].path) << "\n";
      }
      // On stderr: stdout stays one path per line for scripts.
      for (const std::string& summary : summaries)
        print_error(summary);
      return kExitOk;
    }

    if (options.stat) {
      const std::vector<PathCounts> counts = counts_by_index(ws, info, paths);
      std::size_t width = 0;
      for (std::size_t i = 0; i < info.changes.size(); ++i) {
        if (shown[i]) width = std::max(width, core::quote_name(info.changes[i].path).size());
      }
      width = std::min<std::size_t>(width, 60);
      std::uint64_t files = 0;
      std::uint64_t added = 0;
      std::uint64_t removed = 0;
      for (std::size_t i = 0; i < info.changes.size(); ++i) {
        if (!selected[i]) continue;
        const PathCounts& stat = counts[i];
        ++files;
        added += stat.added_lines;
        removed += stat.removed_lines;
        if (!shown[i]) continue;
        std::string name = core::quote_name(info.changes[i].path);
        name.resize(std::max(name.size(), width), ' ');
        std::string kind(to_string(info.changes[i].kind));
        kind.resize(std::max<std::size_t>(kind.size(), 8), ' ');
        std::cout << " " << kind << " " << name << " | ";
        if (stat.binary) {
          std::cout << "binary";
        } else {
          std::cout << "+" << stat.added_lines << " -" << stat.removed_lines;
        }
        if (stat.not_shown != PathCounts::Unread::None) {
          std::cout << "  ("
                    << (stat.not_shown == PathCounts::Unread::Both ? "before and after"
                                                                   : unread_name(stat.not_shown))
                    << " not shown)";
        }
        if (info.changes[i].contains_secret) std::cout << "  (holds a secret)";
        if (info.changes[i].before_redacted) std::cout << "  (held a secret before)";
        std::cout << "\n";
      }
      for (const std::string& summary : summaries)
        std::cout << " " << summary << "\n";
      std::cout << " " << files << (files == 1 ? " path" : " paths") << " changed, " << added
                << (added == 1 ? " insertion(+), " : " insertions(+), ") << removed
                << (removed == 1 ? " deletion(-)" : " deletions(-)") << "\n";
      return kExitOk;
    }

    // Before the first "diff --git": `git apply` skips such lines.
    std::string preamble;
    for (const std::string& summary : summaries)
      preamble += summary + "\n";
    for (std::size_t i = 0; i < info.changes.size(); ++i) {
      if (shown[i] && info.changes[i].contains_secret) {
        preamble += "secret: " + core::quote_name(info.changes[i].path) +
                    " holds a registered secret value (redacted below; commit needs "
                    "--allow-secrets)\n";
      }
      if (shown[i] && info.changes[i].before_redacted) {
        preamble += "secret: " + core::quote_name(info.changes[i].path) +
                    " held a registered secret value before this change (redacted below)\n";
      } else if (shown[i] && info.changes[i].before_withheld) {
        preamble += "secret: what " + core::quote_name(info.changes[i].path) +
                    " held before this change is not shown: it could not be checked for "
                    "registered secret values\n";
      }
    }
    // Each path's part written as it is made, in path order (info.changes'
    // order too): a large diff is never held whole in memory. Grouped or
    // unselected paths are left out; a section of any other path (none is
    // expected) is shown, so that nothing is dropped. Piped, none of it is
    // printed unless all of it was made (WholeOutput).
    WholeOutput out;
    print_diff_text(out, preamble);
    ChangeCursor cursor(info.changes);
    ws.diff(id, DiffOptions{.colour = stdout_is_colour_terminal(), .paths = paths},
            [&](const std::string& path, std::string_view section) {
              const auto index = cursor.index_of(path);
              if (!index || shown[*index]) print_diff_text(out, section);
            });
    out.finish();
    return kExitOk;
  });
}

}  // namespace pulsebox::cli
