#include "pulsebox/audit.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "audit/chain.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "pulsebox/secrets.h"

namespace pulsebox {

using core::Error;
using core::ErrorKind;
using ordered_json = nlohmann::ordered_json;

namespace audit {

const std::string kGenesisHash(64, '0');

std::string chain_hash(std::string_view prev, std::string_view body) {
  core::Sha256 hasher;
  hasher.update(prev);
  hasher.update(body);
  return hasher.hex_digest();
}

std::optional<SplitLine> split_hashed_line(std::string_view line) {
  // The line ends with `,"hash":"<64 hex>"}`.
  static constexpr std::string_view kKey = ",\"hash\":\"";
  constexpr std::size_t kSuffix = kKey.size() + 64 + 2;
  if (line.size() < kSuffix + 2 || line.back() != '}') return std::nullopt;
  const std::size_t at = line.size() - kSuffix;
  if (line.substr(at, kKey.size()) != kKey || line[line.size() - 2] != '"') return std::nullopt;
  SplitLine split;
  split.body = line.substr(0, at);
  split.hash = line.substr(at + kKey.size(), 64);
  return split;
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(micros % 1000000));
  return buffer;
}

}  // namespace audit

namespace {

struct ChainTip {
  std::uint64_t seq = 0;
  std::string hash = audit::kGenesisHash;
};

// Reads the last complete line of the (locked) log to continue its chain.
core::Result<ChainTip> read_chain_tip(int fd, const std::string& name) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error::from_errno("audit", "stat " + name);
  if (st.st_size == 0) return ChainTip{};
  std::string tail;
  off_t end = st.st_size;
  off_t start = end;
  // Grow the window backwards until it holds a whole last line.
  for (;;) {
    const off_t step = std::min<off_t>(start, 8192);
    start -= step;
    std::string chunk(static_cast<std::size_t>(step), '\0');
    if (::pread(fd, chunk.data(), chunk.size(), start) != step) {
      return Error::from_errno("audit", "reading the end of " + name);
    }
    tail.insert(0, chunk);
    std::string_view view = tail;
    if (!view.empty() && view.back() == '\n') view.remove_suffix(1);
    if (view.find('\n') != std::string_view::npos || start == 0) break;
    if (tail.size() > (16u << 20)) break;
  }
  std::string_view view = tail;
  if (view.empty() || view.back() != '\n') {
    return Error(ErrorKind::kRecovery, "audit",
                 name + ": the last line is incomplete; run `pulsebox audit verify " + name + "`");
  }
  view.remove_suffix(1);
  const std::size_t newline = view.rfind('\n');
  const std::string_view last = newline == std::string_view::npos ? view : view.substr(newline + 1);
  const auto split = audit::split_hashed_line(last);
  ChainTip tip;
  try {
    const auto parsed = nlohmann::json::parse(last);
    tip.seq = parsed.at("seq").get<std::uint64_t>();
  } catch (const nlohmann::json::exception&) {
    return Error(
        ErrorKind::kRecovery, "audit",
        name + ": the last line is not an audit entry; run `pulsebox audit verify " + name + "`");
  }
  if (!split) {
    return Error(ErrorKind::kRecovery, "audit",
                 name + ": the last line has no hash; run `pulsebox audit verify " + name + "`");
  }
  tip.hash = std::string(split->hash);
  return tip;
}

// The tips this process appended last, by file (device, inode): a new
// AuditLog on a log this process wrote (a server makes one per request)
// continues from there while the file has the size that append left,
// instead of reading and parsing the last line again. Another writer's
// line changes the size, and the tip is read from the file as before.
struct KnownTip {
  std::uint64_t size = 0;
  timespec mtime{};  // and the time it left (an inode reused for another file)
  std::uint64_t seq = 0;
  std::string hash;
};
std::mutex known_tips_mutex;
std::map<std::pair<dev_t, ino_t>, KnownTip>& known_tips() {
  static std::map<std::pair<dev_t, ino_t>, KnownTip> tips;
  return tips;
}

std::optional<ChainTip> known_tip(const struct stat& st) {
  const std::lock_guard lock(known_tips_mutex);
  const auto it = known_tips().find({st.st_dev, st.st_ino});
  if (it == known_tips().end() || it->second.size != static_cast<std::uint64_t>(st.st_size) ||
      it->second.mtime.tv_sec != st.st_mtim.tv_sec ||
      it->second.mtime.tv_nsec != st.st_mtim.tv_nsec) {
    return std::nullopt;
  }
  return ChainTip{it->second.seq, it->second.hash};
}

// After an append: the file as it is now (size and time) and its new tip.
void remember_tip(int fd, std::uint64_t seq, const std::string& hash) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  const std::lock_guard lock(known_tips_mutex);
  known_tips()[{st.st_dev, st.st_ino}] = {static_cast<std::uint64_t>(st.st_size), st.st_mtim, seq,
                                          hash};
}

nlohmann::ordered_json to_json_value(const AuditValue& value) {
  return std::visit(
      [](const auto& v) -> ordered_json {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::nullptr_t>) {
          return nullptr;
        } else {
          return v;
        }
      },
      value);
}

}  // namespace

AuditLog::AuditLog(std::filesystem::path path, const SecretScrubber* scrubber)
    : AuditLog(std::move(path), scrubber, Options{}) {}

AuditLog::AuditLog(std::filesystem::path path, const SecretScrubber* scrubber, Options options)
    : path_(std::move(path)), scrubber_(scrubber), options_(options) {
  std::error_code ec;
  if (path_.has_parent_path()) std::filesystem::create_directories(path_.parent_path(), ec);
  // Read-write: each record reads the chain's tip back (pread) under the
  // same lock it appends with.
  fd_ = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0)
    core::throw_error(Error::from_errno("audit", "cannot open audit log " + path_.string()));
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::uint64_t AuditLog::record(const AuditRecord& record) {
  bool redacted = false;
  auto clean = [&](const std::string& text) {
    std::string out = text;
    if (scrubber_ != nullptr) {
      auto scrubbed = scrubber_->scrub(text);
      redacted = redacted || scrubbed.changed;
      out = std::move(scrubbed.text);
    }
    return core::strip_control_characters(out);
  };

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
  std::optional<ChainTip> cached;
  if (tip_known_ && static_cast<std::uint64_t>(st.st_size) == tip_size_) {
    cached = ChainTip{tip_seq_, tip_hash_};
  } else {
    cached = known_tip(st);
  }
  const ChainTip tip = cached ? *cached : core::value_or_throw(read_chain_tip(fd_, path_.string()));
  tip_known_ = false;  // until this append is known to have gone through whole

  ordered_json entry;
  entry["seq"] = tip.seq + 1;
  entry["timestamp"] = audit::utc_timestamp();
  entry["pid"] = static_cast<std::int64_t>(::getpid());
  entry["action"] = clean(record.action);
  entry["target"] = clean(record.target);
  entry["decision"] = clean(record.decision);
  entry["exit_code"] = record.exit_code ? ordered_json(*record.exit_code) : ordered_json(nullptr);
  entry["duration_ms"] =
      record.duration_ms ? ordered_json(*record.duration_ms) : ordered_json(nullptr);
  entry["container_id"] = clean(record.container_id);
  entry["isolation_level"] = clean(record.isolation_level);
  entry["detail"] = clean(record.detail);
  for (const auto& [key, value] : record.extra) {
    const std::string name = core::strip_control_characters(key);
    if (entry.contains(name) || name == "hash" || name == "prev" || name == "redacted") continue;
    if (const auto* text = std::get_if<std::string>(&value)) {
      entry[name] = clean(*text);
    } else {
      entry[name] = to_json_value(value);
    }
  }
  entry["redacted"] = redacted;
  entry["prev"] = tip.hash;

  std::string body = entry.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  body.pop_back();  // the closing brace; the hash goes in front of it
  const std::string hash = audit::chain_hash(tip.hash, body);
  const std::string line = body + ",\"hash\":\"" + hash + "\"}\n";

  const ssize_t written = ::write(fd_, line.data(), line.size());
  if (written != static_cast<ssize_t>(line.size())) {
    core::throw_error(
        Error::from_errno("audit", "appending to " + path_.string(), written < 0 ? errno : EIO));
  }
  if (options_.fsync && ::fsync(fd_) != 0) {
    core::throw_error(Error::from_errno("audit", "fsync " + path_.string()));
  }
  tip_known_ = true;
  tip_size_ = static_cast<std::uint64_t>(st.st_size) + line.size();
  tip_seq_ = tip.seq + 1;
  tip_hash_ = hash;
  remember_tip(fd_, tip_seq_, tip_hash_);
  return tip.seq + 1;
}

std::uint64_t AuditLog::log_network(const std::string& destination, std::optional<int> port,
                                    const std::string& protocol, const std::string& decision,
                                    const std::string& backend,
                                    const std::string& enforcement_level,
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
  return record(entry);
}

namespace {

struct ParsedLine {
  bool parsed = false;
  bool hash_valid = false;
  std::uint64_t seq = 0;
  std::string prev;
  std::string hash;
};

ParsedLine parse_line(std::string_view line) {
  ParsedLine out;
  const auto split = audit::split_hashed_line(line);
  try {
    const auto value = nlohmann::json::parse(line);
    out.seq = value.at("seq").get<std::uint64_t>();
    out.prev = value.at("prev").get<std::string>();
    out.hash = value.at("hash").get<std::string>();
    out.parsed = split.has_value();
  } catch (const nlohmann::json::exception&) {
    return out;
  }
  out.hash_valid = out.parsed && audit::chain_hash(out.prev, split->body) == split->hash &&
                   split->hash == out.hash;
  return out;
}

}  // namespace

AuditVerification verify_audit_log(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) core::throw_error(Error::from_errno("audit", "cannot open " + path.string()));
  std::vector<ParsedLine> lines;
  std::string line;
  while (std::getline(in, line))
    lines.push_back(parse_line(line));
  if (in.bad()) core::throw_error(Error::from_errno("audit", "reading " + path.string()));

  AuditVerification result;
  std::uint64_t expected_seq = 1;
  std::string expected_prev = audit::kGenesisHash;
  auto fail = [&](std::size_t index, std::string problem) {
    result.ok = false;
    result.line = index + 1;
    result.problem = std::move(problem);
    return result;
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const ParsedLine& entry = lines[i];
    if (!entry.parsed) return fail(i, "edited: not a valid audit entry");
    if (!entry.hash_valid) return fail(i, "edited: the content does not match its hash");
    const std::string seq_text = std::to_string(entry.seq);
    const std::string expected_text = std::to_string(expected_seq);
    if (entry.seq == expected_seq) {
      if (entry.prev != expected_prev) {
        return fail(i, "edited or inserted: \"prev\" is not the hash of the line before");
      }
      expected_prev = entry.hash;
      ++expected_seq;
      continue;
    }
    if (entry.seq > expected_seq) {
      for (std::size_t j = i + 1; j < lines.size(); ++j) {
        if (lines[j].parsed && lines[j].seq < entry.seq) {
          return fail(i, "reordered: seq " + seq_text + " comes before seq " +
                             std::to_string(lines[j].seq) + " (line " + std::to_string(j + 1) +
                             ")");
        }
      }
      const std::uint64_t missing = entry.seq - expected_seq;
      return fail(i, std::to_string(missing) + (missing == 1 ? " line" : " lines") +
                         " removed before this line (expected seq " + expected_text + ", found " +
                         seq_text + ")");
    }
    return fail(i, "inserted or reordered: seq " + seq_text + " repeats or goes back (expected " +
                       expected_text + ")");
  }
  result.ok = true;
  result.entries = lines.size();
  return result;
}

}  // namespace pulsebox
