// The audit log's line format and hash chain, shared by the writer and the
// verifier. A line is
//   unkeyed: BODY,"hash":"<64 hex>"}
//   keyed:   BODY,"hash":"<64 hex>","mac":"<64 hex>"}
// where BODY is the JSON object without its closing brace, ending in
// `"prev":"<64 hex>"` (a keyed BODY has `"key_id":"<16 hex>"` just before),
// hash = SHA-256(prev ‖ BODY) and mac = HMAC-SHA256(key, prev ‖ BODY).
// Everything here reads hostile bytes: lines are bounded in length and
// parsed without building a tree, to a bounded depth.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pulsebox::audit {

extern const std::string kGenesisHash;  // 64 zeros: the `prev` of line 1

// No line the writer makes is longer (it cuts long fields to fit); a longer
// line is not an audit entry, and nothing reads more than this for one.
inline constexpr std::size_t kMaxLineBytes = 1u << 20;

// SHA-256 hex of prev followed by body.
std::string chain_hash(std::string_view prev, std::string_view body);

struct SplitLine {
  std::string_view body;  // the line up to `,"hash":"...`
  std::string_view hash;
  std::string_view mac;  // empty: an unkeyed line
};
// Splits a line into its hashed body, the hash and the MAC; nullopt if the
// line does not end like one.
std::optional<SplitLine> split_hashed_line(std::string_view line);

// The fields the chain needs, checked against the line's own text.
struct Entry {
  SplitLine split;  // views into the parsed line
  std::uint64_t seq = 0;
  std::string prev;
  std::string key_id;  // keyed lines only
  std::string action;
  std::string detail;
  bool keyed() const { return !split.mac.empty(); }
};
// Parses one line (without its newline): a flat JSON object of unique keys
// whose `hash` (and `mac`) are the ones at its end. The error says what is
// wrong, for "line N: not a valid audit entry: ...".
core::Result<Entry> parse_entry(std::string_view line);

// "2026-12-05T21:47:20.346920Z": UTC with microseconds, the time of every
// record. Computed from the clock alone: no time zone is read (gmtime_r
// reads /etc/localtime on its first call in a process).
std::string utc_timestamp();
std::string utc_timestamp(std::chrono::system_clock::time_point at);

}  // namespace pulsebox::audit
