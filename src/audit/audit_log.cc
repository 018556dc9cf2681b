// The audit log's writer: continues the chain from its tip, under flock, and
// in keyed mode checks that tip against the anchor before every append that
// does not follow one of its own.
#include "pulsebox/audit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "audit/anchor.h"
#include "audit/chain.h"
#include "audit/key.h"
#include "audit/line_reader.h"
#include "core/json_writer.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "pulsebox/secrets.h"

namespace pulsebox {

using core::Error;
using core::ErrorKind;
using ordered_json = nlohmann::ordered_json;

namespace {

struct ChainTip {
  std::uint64_t seq = 0;
  std::string hash = audit::kGenesisHash;
  std::uint64_t keyed_from = 0;
  std::uint64_t generation = 0;
};

Error recovery(const std::string& name, const std::string& what) {
  return Error(ErrorKind::kRecovery, "audit",
               name + ": " + what + "; run `pulsebox audit verify " + name + "`");
}

struct CheckedLine {
  std::uint64_t seq = 0;
  std::string hash;
  bool keyed = false;
};

// The line ending at byte `end`, checked: a whole entry, and if keyed, one
// whose hash holds and whose MAC is `key`'s. Without a key, a keyed line is
// refused (`why_no_key` says why there is none): appending unkeyed lines
// would break its chain of MACs.
core::Result<CheckedLine> read_checked_line(int fd, std::uint64_t end, const audit::Key* key,
                                            const std::string& name,
                                            const std::string& why_no_key) {
  std::string storage;
  auto line = audit::read_line_ending_at(fd, end, storage);
  if (!line.ok()) return recovery(name, "the last line is incomplete");
  auto entry = audit::parse_entry(line->text);
  if (!entry.ok()) {
    return recovery(name, "the last line is not an audit entry (" + entry.error().message() + ")");
  }
  const audit::SplitLine& split = entry->split;
  if (entry->keyed()) {
    const std::string use_key = ": set PULSEBOX_AUDIT_KEY (or --audit-key) to the key that made it";
    if (key == nullptr) {
      return Error(ErrorKind::kSecurity, "audit",
                   name + " is keyed (key id " + entry->key_id +
                       "), but no audit key is available here" +
                       (why_no_key.empty() ? "" : " (" + why_no_key + ")") + use_key);
    }
    if (entry->key_id != key->id()) {
      return Error(ErrorKind::kSecurity, "audit",
                   name + " is keyed with another key (key id " + entry->key_id + "; " +
                       key->file().string() + " is key id " + key->id() + ")" + use_key);
    }
    if (audit::chain_hash(entry->prev, split.body) != split.hash ||
        !key->matches(entry->prev, split.body, split.mac)) {
      return Error(ErrorKind::kSecurity, "audit",
                   name + ": the record ending at byte " + std::to_string(end) +
                       " does not match its hash or its MAC: it was edited; run `pulsebox " +
                       "audit verify " + name + "`");
    }
  }
  return CheckedLine{entry->seq, std::string(split.hash), entry->keyed()};
}

Error anchor_mismatch(const std::string& name, const std::filesystem::path& anchor,
                      const std::string& what) {
  return Error(ErrorKind::kSecurity, "audit",
               name + " does not match its anchor " + anchor.string() + ": " + what +
                   ". Nothing was appended. Check it with `pulsebox audit verify " + name +
                   "`; to keep it as evidence and start a new log, move it away (the new log "
                   "records that this one was removed)");
}

// The tip of a keyed log, held against its anchor. `note` gets what the
// next record must say first, if anything.
core::Result<ChainTip> keyed_tip(int fd, std::uint64_t size, const audit::Key& key,
                                 const audit::AnchorFile& anchor_file, const std::string& log_id,
                                 const std::string& name, std::string* note) {
  PB_TRY(anchor, anchor_file.read(key, log_id));
  if (!anchor) {
    if (size == 0) return ChainTip{0, audit::kGenesisHash, 1, 0};
    PB_TRY(last, read_checked_line(fd, size, &key, name, ""));
    // An unkeyed log turns keyed here; a keyed one lost its anchor.
    if (last.keyed) {
      *note = "no anchor was found for this keyed log at " + anchor_file.path().string() +
              " (the log was moved or copied, or its anchor removed): it is anchored anew here; "
              "records removed from its end before this line would not show";
    }
    return ChainTip{last.seq, last.hash, last.seq + 1, 0};
  }
  if (size == 0) {
    *note = "the log at this path ended at record " + std::to_string(anchor->records) + " (hash " +
            anchor->tip +
            ") by its anchor; it was removed, rotated or emptied, and a new chain starts here";
    return ChainTip{0, audit::kGenesisHash, 1, anchor->generation};
  }
  if (size < anchor->bytes) {
    return anchor_mismatch(name, anchor_file.path(),
                           "it is " + std::to_string(size) + " bytes, its anchor says " +
                               std::to_string(anchor->bytes) + " (" +
                               std::to_string(anchor->records) + " records): records were removed");
  }
  auto at_anchor = read_checked_line(fd, anchor->bytes, &key, name, "");
  if (!at_anchor.ok() || at_anchor->seq != anchor->records || at_anchor->hash != anchor->tip) {
    return anchor_mismatch(name, anchor_file.path(),
                           "its record " + std::to_string(anchor->records) + " is not the one " +
                               "the anchor names (the log was replaced or rewritten)");
  }
  // Records after the anchor's (a writer stopped before updating it) must
  // continue the chain, each with this key's MAC.
  ChainTip tip{anchor->records, anchor->tip, anchor->keyed_from, anchor->generation};
  audit::LineReader reader(fd, anchor->bytes);
  for (;;) {
    auto next = reader.next();
    if (!next.ok() || !*next) {
      if (!next.ok()) {
        return anchor_mismatch(name, anchor_file.path(), "a line after its anchor's is too long");
      }
      break;
    }
    const audit::Line& line = **next;
    auto entry = audit::parse_entry(line.text);
    if (!line.terminated || !entry.ok() || !entry->keyed() || entry->key_id != key.id() ||
        entry->seq != tip.seq + 1 || entry->prev != tip.hash ||
        audit::chain_hash(entry->prev, entry->split.body) != entry->split.hash ||
        !key.matches(entry->prev, entry->split.body, entry->split.mac)) {
      return anchor_mismatch(name, anchor_file.path(),
                             "the record after seq " + std::to_string(tip.seq) +
                                 " is not a keyed continuation of its chain");
    }
    tip.seq = entry->seq;
    tip.hash = std::string(entry->split.hash);
  }
  return tip;
}

// The tips this process appended last, by file (device, inode): a new
// AuditLog on a log this process wrote (a server makes one per request)
// continues from there while the file has the size and ctime that append
// left (and the same key and anchor), instead of reading the log and the
// anchor again. Another writer's line changes both, and the tip is read
// from the file as before.
struct KnownTip {
  std::uint64_t size = 0;
  timespec ctime{};
  std::string key_id;
  std::string anchor;
  ChainTip tip;
};
std::mutex known_tips_mutex;
std::map<std::pair<dev_t, ino_t>, KnownTip>& known_tips() {
  static std::map<std::pair<dev_t, ino_t>, KnownTip> tips;
  return tips;
}

std::optional<ChainTip> known_tip(const struct stat& st, const std::string& key_id,
                                  const std::string& anchor) {
  const std::lock_guard lock(known_tips_mutex);
  const auto it = known_tips().find({st.st_dev, st.st_ino});
  if (it == known_tips().end() || it->second.size != static_cast<std::uint64_t>(st.st_size) ||
      it->second.ctime.tv_sec != st.st_ctim.tv_sec ||
      it->second.ctime.tv_nsec != st.st_ctim.tv_nsec || it->second.key_id != key_id ||
      it->second.anchor != anchor) {
    return std::nullopt;
  }
  return it->second.tip;
}

void remember_tip(const struct stat& st, const std::string& key_id, const std::string& anchor,
                  const ChainTip& tip) {
  const std::lock_guard lock(known_tips_mutex);
  known_tips()[{st.st_dev, st.st_ino}] = {static_cast<std::uint64_t>(st.st_size), st.st_ctim,
                                          key_id, anchor, tip};
}

// `text` cut to `cap` bytes (at a character boundary), saying how much was cut.
std::string cut(std::string text, std::size_t cap) {
  if (text.size() <= cap) return text;
  std::size_t at = cap;
  while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80)
    --at;
  const std::size_t removed = text.size() - at;
  text.resize(at);
  return text + " [audit: " + std::to_string(removed) + " bytes cut]";
}

// `text` where it is valid UTF-8, else as nlohmann's dump() replaces its
// malformed sequences (U+FFFD), read back.
std::string valid_utf8(std::string text) {
  if (core::is_valid_utf8(text)) return text;
  const std::string quoted =
      ordered_json(text).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  return ordered_json::parse(quoted).get<std::string>();
}

// A double as nlohmann writes it (12.0, 1e+300; NaN and infinities: null).
std::string json_number(double value) {
  return ordered_json(value).dump();
}

// One line (with its newline) for `record` at `seq` after `prev`, written
// by process `pid`; `hash` gets its hash. String fields are cut to `cap`
// bytes each. The text is what nlohmann::ordered_json's dump() gives the
// same fields (a test holds it so), written straight into the line: its
// map of nodes cost more than the rest of a record.
std::string make_line(const AuditRecord& record, std::uint64_t seq, const std::string& prev,
                      pid_t pid, const audit::Key* key, const SecretScrubber* scrubber,
                      std::size_t cap, std::string* hash) {
  bool redacted = false;
  auto clean = [&](const std::string& text) {
    std::string out = text;
    if (scrubber != nullptr) {
      auto scrubbed = scrubber->scrub(text);
      redacted = redacted || scrubbed.changed;
      out = std::move(scrubbed.text);
    }
    return valid_utf8(cut(core::strip_control_characters(out), cap));
  };
  std::string body;
  body.reserve(320 + record.target.size() + record.detail.size());
  core::JsonObjectWriter entry(body);
  entry.field("seq", std::uint64_t{seq});
  entry.field("timestamp", audit::utc_timestamp());
  entry.field("pid", static_cast<std::int64_t>(pid));
  entry.field("action", clean(record.action));
  entry.field("target", clean(record.target));
  entry.field("decision", clean(record.decision));
  if (record.exit_code) {
    entry.field("exit_code", static_cast<std::int64_t>(*record.exit_code));
  } else {
    entry.raw("exit_code", "null");
  }
  entry.raw("duration_ms", record.duration_ms ? json_number(*record.duration_ms) : "null");
  entry.field("container_id", clean(record.container_id));
  entry.field("isolation_level", clean(record.isolation_level));
  entry.field("detail", clean(record.detail));
  // A name taken already (first one wins), or one of the chain's own, is
  // left out. Compared once made valid UTF-8: two names that differ only
  // in malformed bytes are one name in the line, and a reader refuses a
  // line that repeats a name.
  std::vector<std::string> names = {"seq",          "timestamp",       "pid",       "action",
                                    "target",       "decision",        "exit_code", "duration_ms",
                                    "container_id", "isolation_level", "detail"};
  for (const auto& [name_raw, value] : record.extra) {
    const std::string name = valid_utf8(cut(core::strip_control_characters(name_raw), cap));
    if (std::find(names.begin(), names.end(), name) != names.end() || name == "hash" ||
        name == "prev" || name == "redacted" || name == "key_id" || name == "mac") {
      continue;
    }
    names.push_back(name);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::nullptr_t>) {
            entry.raw(name, "null");
          } else if constexpr (std::is_same_v<V, double>) {
            entry.raw(name, json_number(v));
          } else if constexpr (std::is_same_v<V, std::string>) {
            entry.field(name, clean(v));
          } else {
            entry.field(name, v);
          }
        },
        value);
  }
  entry.field("redacted", redacted);
  if (key != nullptr) entry.field("key_id", key->id());
  entry.field("prev", prev);
  // Left open: the hash goes in front of the closing brace.
  *hash = audit::chain_hash(prev, body);
  std::string line = body + ",\"hash\":\"" + *hash + "\"";
  if (key != nullptr) {
    const std::string mac = key->mac(prev, body);
    if (mac.empty()) core::throw_error(Error(ErrorKind::kInternal, "audit", "HMAC failed"));
    line += ",\"mac\":\"" + mac + "\"";
  }
  return line + "}\n";
}

// As make_line, with fields cut until the line fits the limit.
std::string make_bounded_line(const AuditRecord& record, std::uint64_t seq, const std::string& prev,
                              pid_t pid, const audit::Key* key, const SecretScrubber* scrubber,
                              std::string* hash) {
  for (const std::size_t cap : {std::size_t(-1), std::size_t(64) << 10, std::size_t(16) << 10,
                                std::size_t(4) << 10, std::size_t(1) << 10}) {
    std::string line = make_line(record, seq, prev, pid, key, scrubber, cap, hash);
    if (line.size() <= audit::kMaxLineBytes) return line;
  }
  core::throw_error(Error(ErrorKind::kInvalidInput, "audit",
                          "a record with " + std::to_string(record.extra.size()) +
                              " extra fields does not fit in an audit line of 1 MiB"));
}

}  // namespace

AuditKeyLocation default_audit_key_location() {
  return audit::key_location([](const char* name) { return std::getenv(name); });
}

AuditLog::AuditLog(std::filesystem::path path, const SecretScrubber* scrubber)
    : AuditLog(std::move(path), scrubber, Options{}) {}

AuditLog::AuditLog(std::filesystem::path path, const SecretScrubber* scrubber, Options options)
    : path_(std::move(path)), scrubber_(scrubber), options_(std::move(options)) {
  std::error_code ec;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
  // Read-write: each record reads the chain's tip back (pread) under the
  // same lock it appends with. Non-blocking: a FIFO put in its place must
  // not hang the open.
  fd_ = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
               0600);
  if (fd_ < 0)
    core::throw_error(Error::from_errno("audit", "cannot open audit log " + path_.string()));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    core::throw_error(Error(ErrorKind::kInvalidInput, "audit",
                            "audit log " + path_.string() + " is not a regular file"));
  }
  const AuditKeyLocation& location = options_.key;
  if (location.file.empty()) {
    key_warning_ = location.unavailable;
    return;
  }
  auto key = audit::Key::load(location.file, /*create=*/true);
  if (!key.ok()) {
    if (location.chosen) {
      ::close(fd_);
      fd_ = -1;
      core::throw_error(key.error());
    }
    key_warning_ = key.error().to_string();
    return;
  }
  log_id_ = audit::log_identity(path_);
  auto anchor = audit::AnchorFile::open(audit::anchor_path(**key, log_id_), /*create=*/true);
  if (!anchor.ok()) {
    ::close(fd_);
    fd_ = -1;
    core::throw_error(anchor.error());
  }
  key_ = std::move(key).value();
  anchor_ = std::make_unique<audit::AnchorFile>(std::move(anchor).value());
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::filesystem::path AuditLog::key_file() const {
  return key_ ? key_->file() : std::filesystem::path();
}

std::uint64_t AuditLog::record(const AuditRecord& record) {
  return append(std::span<const AuditRecord>(&record, 1));
}

std::uint64_t AuditLog::record_all(std::span<const AuditRecord> records) {
  if (records.empty()) return 0;
  return append(records);
}

std::uint64_t AuditLog::append(std::span<const AuditRecord> records) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (::flock(fd_, LOCK_EX) != 0) {
    core::throw_error(Error::from_errno("audit", "locking " + path_.string()));
  }
  struct Unlock {
    int fd;
    ~Unlock() { ::flock(fd, LOCK_UN); }
  } unlock{fd_};

  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    core::throw_error(Error::from_errno("audit", "stat " + path_.string()));
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  const std::string key_id = key_ ? key_->id() : "";
  const std::string anchor = anchor_ ? anchor_->path().string() : "";
  std::optional<ChainTip> cached;
  if (tip_ && tip_->size == size && tip_->ctime_sec == st.st_ctim.tv_sec &&
      tip_->ctime_nsec == st.st_ctim.tv_nsec) {
    cached = ChainTip{tip_->seq, tip_->hash, tip_->keyed_from, tip_->generation};
  } else {
    cached = known_tip(st, key_id, anchor);
  }
  std::string note;
  ChainTip tip;
  if (cached) {
    tip = *cached;
  } else if (key_) {
    tip =
        core::value_or_throw(keyed_tip(fd_, size, *key_, *anchor_, log_id_, path_.string(), &note));
  } else if (size > 0) {
    const auto last =
        core::value_or_throw(read_checked_line(fd_, size, nullptr, path_.string(), key_warning_));
    tip = ChainTip{last.seq, last.hash, 0, 0};
  }
  tip_.reset();  // until this append is known to have gone through whole

  std::string lines;
  std::string hash;
  const pid_t pid = ::getpid();  // one system call for the whole append
  if (!note.empty()) {
    lines += make_bounded_line(
        {.action = "audit-anchor", .target = path_.string(), .decision = "allow", .detail = note},
        tip.seq + 1, tip.hash, pid, key_.get(), nullptr, &hash);
    ++tip.seq;
    tip.hash = hash;
  }
  for (const AuditRecord& record : records) {
    lines += make_bounded_line(record, tip.seq + 1, tip.hash, pid, key_.get(), scrubber_, &hash);
    ++tip.seq;
    tip.hash = hash;
  }

  const ssize_t written = ::write(fd_, lines.data(), lines.size());
  if (written != static_cast<ssize_t>(lines.size())) {
    core::throw_error(
        Error::from_errno("audit", "appending to " + path_.string(), written < 0 ? errno : EIO));
  }
  if (options_.fsync && ::fsync(fd_) != 0) {
    core::throw_error(Error::from_errno("audit", "fsync " + path_.string()));
  }
  // The anchor follows the log: a crash in between leaves it one append
  // behind, and those records still carry valid MACs.
  if (key_) {
    ++tip.generation;
    core::check_or_throw(anchor_->write(
        *key_, log_id_, {tip.generation, tip.seq, size + lines.size(), tip.hash, tip.keyed_from},
        options_.fsync));
  }
  if (::fstat(fd_, &st) == 0) {
    tip_ = Tip{static_cast<std::uint64_t>(st.st_size),
               st.st_ctim.tv_sec,
               st.st_ctim.tv_nsec,
               tip.seq,
               tip.hash,
               tip.keyed_from,
               tip.generation};
    remember_tip(st, key_id, anchor, tip);
  }
  return tip.seq;
}

std::uint64_t AuditLog::log_network(const std::string& destination, std::optional<int> port,
                                    const std::string& protocol, const std::string& decision,
                                    const std::string& backend,
                                    const std::string& enforcement_level,
                                    const std::string& detail) {
  return record(
      network_record(destination, port, protocol, decision, backend, enforcement_level, detail));
}

AuditRecord network_record(const std::string& destination, std::optional<int> port,
                           const std::string& protocol, const std::string& decision,
                           const std::string& backend, const std::string& enforcement_level,
                           const std::string& detail) {
  AuditRecord entry;
  entry.action = "network";
  entry.target = destination;
  entry.decision = decision;
  entry.container_id = backend;
  entry.detail = detail;
  entry.extra = {
      {"destination", destination},
      {"port", port ? AuditValue(static_cast<std::int64_t>(*port)) : AuditValue(nullptr)},
      {"protocol", protocol},
      {"backend", backend},
      {"enforcement_level", enforcement_level},
  };
  return entry;
}

}  // namespace pulsebox
