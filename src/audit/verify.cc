// The audit log's verifier: one pass over the file with bounded memory,
// the first problem found, and what the result proves.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/anchor.h"
#include "audit/chain.h"
#include "audit/key.h"
#include "audit/line_reader.h"
#include "core/throw_error.h"
#include "core/unique_fd.h"
#include "pulsebox/audit.h"

namespace pulsebox {

using core::Error;
using core::ErrorKind;
namespace fs = std::filesystem;

namespace {

// A shared lock, so that no append is read half written. A writer holds
// its lock for one append; one that holds it for seconds is reported.
core::Status lock_shared(int fd, const fs::path& path) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) return core::ok_status();
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return Error::from_errno("audit", "locking " + path.string());
    }
    ::usleep(50 * 1000);
  }
  return Error(ErrorKind::kConcurrentModification, "audit",
               path.string() + " stayed locked by a writer for 5 s; try again");
}

std::string records(std::uint64_t count) {
  return std::to_string(count) + (count == 1 ? " record" : " records");
}

// What a result without tampering proves, in one sentence.
std::string describe(const AuditVerification& result, const fs::path& anchor_path) {
  const std::string n = records(result.entries);
  if (result.verdict == AuditVerdict::NoRecords) return "no records: the file is empty";
  if (result.verdict == AuditVerdict::Verified) {
    return "keyed chain of " + n +
           ", matches its anchor: no record edited, removed or added since it was written, "
           "except by someone holding the key";
  }
  if (result.keyed_from == 0) {
    return "hash chain of " + n +
           " is consistent, but unkeyed: anyone who can write the file could have rewritten it";
  }
  if (!result.macs_checked) {
    return "hash chain of " + n +
           " is consistent, but its MACs were not checked (no key: give --key or set "
           "PULSEBOX_AUDIT_KEY): anyone who can write the file could have rewritten it";
  }
  return "keyed chain of " + n +
         ", every MAC matches: no record was edited or added without the key; but it has no "
         "anchor (" +
         anchor_path.string() +
         "), so records removed from its end, or an older copy of the whole log, would not show";
}

}  // namespace

AuditVerification verify_audit_log(const fs::path& path, const AuditVerifyOptions& options) {
  AuditVerification result;
  auto tampered = [&](std::uint64_t line, std::string problem) {
    result.verdict = AuditVerdict::Tampered;
    result.ok = false;
    result.line = line;
    result.problem = std::move(problem);
    result.summary = result.problem;
    return result;
  };

  std::unique_ptr<audit::Key> key;
  if (!options.key_file.empty()) {
    key = core::value_or_throw(audit::Key::load(options.key_file, /*create=*/false));
  } else if (!options.anchor_file.empty()) {
    core::throw_error(Error(ErrorKind::kInvalidInput, "audit",
                            "an anchor is checked with its key: give the key too (--key FILE)"));
  }
  // The log first: the anchor is read under its lock, so that both show
  // the same append (a writer updates the anchor before it unlocks).
  core::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  const int open_errno = errno;
  if (fd) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      core::throw_error(Error::from_errno("audit", "stat " + path.string()));
    }
    if (!S_ISREG(st.st_mode)) {
      core::throw_error(Error(ErrorKind::kInvalidInput, "audit",
                              path.string() + " is not a regular file (an audit log is one)"));
    }
    core::check_or_throw(lock_shared(fd.get(), path));
  }

  std::optional<audit::Anchor> anchor;
  fs::path anchor_path;
  if (key) {
    result.macs_checked = true;
    result.anchor = AuditAnchorState::Missing;
    const bool chosen = !options.anchor_file.empty();
    anchor_path =
        chosen ? options.anchor_file : audit::anchor_path(*key, audit::log_identity(path));
    auto file = audit::AnchorFile::open(anchor_path, /*create=*/false);
    if (!file.ok() && (chosen || file.error().error_number() != ENOENT)) {
      core::throw_error(file.error());
    }
    if (file.ok()) {
      // A chosen anchor may come from the log's former place.
      auto read = file->read(*key, chosen ? "" : audit::log_identity(path));
      if (!read.ok()) return tampered(0, read.error().message());
      anchor = std::move(read).value();
    }
  }

  if (!fd && open_errno == ENOENT && anchor && anchor->records > 0) {
    return tampered(
        0, "deleted: the file is missing, but its anchor says it had " + records(anchor->records));
  }
  if (!fd)
    core::throw_error(Error::from_errno("audit", "cannot open " + path.string(), open_errno));

  std::uint64_t expected_seq = 1;
  std::string expected_prev = audit::kGenesisHash;
  bool anchor_seen = false;
  // A seq ahead of the expected one: lines were removed, unless a later
  // line comes back (then they were reordered); read on to tell.
  struct Gap {
    std::uint64_t line, seq, expected;
  };
  std::optional<Gap> gap;
  audit::LineReader reader(fd.get(), 0);
  std::uint64_t index = 0;
  for (;;) {
    auto next = reader.next();
    if (next.ok() && !*next) break;
    ++index;
    if (!next.ok()) {
      if (gap) break;
      return tampered(index, "longer than 1 MiB: not an audit entry");
    }
    const audit::Line& line = **next;
    auto entry = audit::parse_entry(line.text);
    if (gap) {
      if (entry.ok() && entry->seq < gap->seq) {
        return tampered(gap->line, "reordered: seq " + std::to_string(gap->seq) +
                                       " comes before seq " + std::to_string(entry->seq) +
                                       " (line " + std::to_string(index) + ")");
      }
      continue;
    }
    if (!entry.ok()) return tampered(index, "not a valid audit entry: " + entry.error().message());
    if (!line.terminated) {
      return tampered(index,
                      "incomplete: the file ends without a newline (a write cut short, "
                      "or an edit)");
    }
    const audit::SplitLine& split = entry->split;
    if (audit::chain_hash(entry->prev, split.body) != split.hash) {
      return tampered(index, "edited: the content does not match its hash");
    }
    if (entry->keyed()) {
      if (result.keyed_from == 0) result.keyed_from = index;
      if (key && entry->key_id != key->id()) {
        return tampered(index, "made with another key (key id " + entry->key_id + "; " +
                                   key->file().string() + " is key id " + key->id() + ")");
      }
      if (key && !key->matches(entry->prev, split.body, split.mac)) {
        return tampered(index,
                        "edited: its MAC does not match (changed or written by someone "
                        "without the key)");
      }
    } else if (result.keyed_from != 0) {
      return tampered(index, "no MAC, after keyed lines (from line " +
                                 std::to_string(result.keyed_from) +
                                 "): added or rewritten without the key");
    } else if (anchor && entry->seq >= anchor->keyed_from) {
      return tampered(index, "no MAC, but its anchor says every record from seq " +
                                 std::to_string(anchor->keyed_from) +
                                 " on is keyed: the MACs were removed and the chain recomputed");
    }
    if (entry->seq > expected_seq) {
      gap = Gap{index, entry->seq, expected_seq};
      continue;
    }
    if (entry->seq < expected_seq) {
      return tampered(index, "inserted or reordered: seq " + std::to_string(entry->seq) +
                                 " repeats or goes back (expected " + std::to_string(expected_seq) +
                                 ")");
    }
    if (entry->prev != expected_prev) {
      return tampered(index, "edited or inserted: \"prev\" is not the hash of the line before");
    }
    if (anchor && entry->seq == anchor->records) {
      if (split.hash != anchor->tip || line.end != anchor->bytes) {
        return tampered(index, "does not match its anchor (its record " +
                                   std::to_string(anchor->records) +
                                   " is another): the log was replaced or rewritten");
      }
      anchor_seen = true;
    }
    if (key && entry->keyed() && entry->action == "audit-anchor") {
      result.notes.push_back("line " + std::to_string(index) + ": " + entry->detail);
    }
    expected_prev = std::string(split.hash);
    ++expected_seq;
  }
  if (gap) {
    const std::uint64_t missing = gap->seq - gap->expected;
    return tampered(gap->line, std::to_string(missing) + (missing == 1 ? " line" : " lines") +
                                   " removed before this line (expected seq " +
                                   std::to_string(gap->expected) + ", found " +
                                   std::to_string(gap->seq) + ")");
  }
  result.entries = expected_seq - 1;
  if (anchor && result.entries < anchor->records) {
    const std::uint64_t removed = anchor->records - result.entries;
    if (result.entries == 0) {
      return tampered(0, "emptied: the file has no records, but its anchor says it had " +
                             records(anchor->records));
    }
    return tampered(result.entries, records(removed) + " removed from the end, or the log " +
                                        "replaced: its anchor says " + records(anchor->records) +
                                        ", the log ends at record " +
                                        std::to_string(result.entries));
  }
  if (anchor_seen) {
    result.anchor = AuditAnchorState::Matched;
    if (result.entries > anchor->records) {
      result.notes.push_back("lines " + std::to_string(anchor->records + 1) + "-" +
                             std::to_string(result.entries) +
                             " come after the anchor's tip, each with a valid MAC (a writer "
                             "stopped before updating the anchor)");
    }
  }
  if (result.keyed_from > 1) {
    result.notes.insert(result.notes.begin(),
                        "lines 1-" + std::to_string(result.keyed_from - 1) +
                            " are unkeyed (written before the log was keyed): pinned from line " +
                            std::to_string(result.keyed_from) +
                            " on, but they could have been rewritten before");
  }
  result.ok = true;
  if (result.entries == 0) {
    result.verdict = AuditVerdict::NoRecords;
  } else if (key && result.keyed_from != 0 && result.anchor == AuditAnchorState::Matched) {
    result.verdict = AuditVerdict::Verified;
  } else {
    result.verdict = AuditVerdict::Unproven;
  }
  result.summary = describe(result, anchor_path);
  return result;
}

}  // namespace pulsebox
