#include "audit/chain.h"

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "core/sha256.h"

namespace pulsebox::audit {

using core::Error;
using core::ErrorKind;

const std::string kGenesisHash(64, '0');

std::string chain_hash(std::string_view prev, std::string_view body) {
  core::Sha256 hasher;
  hasher.update(prev);
  hasher.update(body);
  return hasher.hex_digest();
}

namespace {

constexpr std::string_view kHashKey = ",\"hash\":\"";
// The end of the hash's value and the start of the mac's.
constexpr std::string_view kMacAfterHash = "\",\"mac\":\"";

bool is_hex(std::string_view text) {
  return text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Reads the top-level members of a flat JSON object through nlohmann's SAX
// interface: no tree is built, and the parse stops at the first nesting
// deeper than the writer ever makes (a line of 100,000 `[` costs nothing).
class EntryReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  static constexpr int kMaxDepth = 8;

  std::string problem;
  std::optional<std::uint64_t> seq;
  std::optional<std::string> prev, hash, mac, key_id, action, detail;

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ == 1 && key_ == "seq") seq = value;
    return scalar();
  }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t& value) override {
    if (depth_ == 1) {
      for (auto [name, field] : {std::pair{"prev", &prev}, std::pair{"hash", &hash},
                                 std::pair{"mac", &mac}, std::pair{"key_id", &key_id},
                                 std::pair{"action", &action}, std::pair{"detail", &detail}}) {
        if (key_ == name) *field = std::move(value);
      }
    }
    return scalar();
  }
  bool binary(binary_t&) override { return fail("binary data"); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t& name) override {
    if (depth_ == 1) {
      if (!keys_.insert(name).second) return fail("the key \"" + name + "\" appears twice");
      key_ = name;
    }
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return fail("not a JSON object");
    return open();
  }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    return fail("not JSON (at byte " + std::to_string(position) + ")");
  }

 private:
  bool scalar() {
    if (depth_ == 0) return fail("not a JSON object");
    return true;
  }
  bool open() {
    if (++depth_ > kMaxDepth) {
      return fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  bool fail(std::string why) {
    if (problem.empty()) problem = std::move(why);
    return false;
  }

  int depth_ = 0;
  std::string key_;
  std::set<std::string> keys_;
};

Error not_an_entry(std::string why) {
  return Error(ErrorKind::kInvalidInput, "audit", std::move(why));
}

}  // namespace

std::optional<SplitLine> split_hashed_line(std::string_view line) {
  if (line.size() < 2 || line.back() != '}' || line[line.size() - 2] != '"') return std::nullopt;
  SplitLine split;
  std::string_view rest = line.substr(0, line.size() - 2);  // without `"}`
  if (rest.size() > 64 + kMacAfterHash.size() &&
      rest.substr(rest.size() - 64 - kMacAfterHash.size(), kMacAfterHash.size()) == kMacAfterHash) {
    split.mac = rest.substr(rest.size() - 64);
    rest.remove_suffix(64 + kMacAfterHash.size());
    if (!is_hex(split.mac)) return std::nullopt;
  }
  if (rest.size() < 64 + kHashKey.size() ||
      rest.substr(rest.size() - 64 - kHashKey.size(), kHashKey.size()) != kHashKey) {
    return std::nullopt;
  }
  split.hash = rest.substr(rest.size() - 64);
  split.body = rest.substr(0, rest.size() - 64 - kHashKey.size());
  if (!is_hex(split.hash)) return std::nullopt;
  return split;
}

core::Result<Entry> parse_entry(std::string_view line) {
  if (line.size() > kMaxLineBytes) return not_an_entry("longer than 1 MiB");
  const auto split = split_hashed_line(line);
  if (!split) return not_an_entry("it does not end with its hash");
  EntryReader reader;
  try {
    nlohmann::json::sax_parse(line.begin(), line.end(), &reader);
  } catch (const nlohmann::json::exception& error) {
    reader.problem = reader.problem.empty() ? error.what() : reader.problem;
  }
  if (!reader.problem.empty()) return not_an_entry(reader.problem);
  // The hash and MAC at the end are the object's own members (keys are
  // unique), so what the chain checks is what a JSON reader sees.
  if (!reader.seq || *reader.seq == 0) return not_an_entry("no \"seq\" of 1 or more");
  if (!reader.prev || reader.prev->size() != 64 || !is_hex(*reader.prev)) {
    return not_an_entry("no \"prev\" hash");
  }
  if (reader.hash != std::string(split->hash))
    return not_an_entry("its \"hash\" is not at its end");
  if (split->mac.empty()) {
    if (reader.mac || reader.key_id) {
      return not_an_entry("it names a key but has no MAC at its end (the MAC was removed)");
    }
  } else if (reader.mac != std::string(split->mac) || !reader.key_id ||
             reader.key_id->size() != 16 || !is_hex(*reader.key_id)) {
    return not_an_entry("its MAC or key id is malformed");
  }
  Entry entry;
  entry.split = *split;
  entry.seq = *reader.seq;
  entry.prev = std::move(*reader.prev);
  entry.key_id = reader.key_id.value_or("");
  entry.action = reader.action.value_or("");
  entry.detail = reader.detail.value_or("");
  return entry;
}

std::string utc_timestamp() {
  return utc_timestamp(std::chrono::system_clock::now());
}

std::string utc_timestamp(std::chrono::system_clock::time_point at) {
  using namespace std::chrono;
  const auto micros = floor<microseconds>(at);
  const auto day = floor<days>(micros);
  const year_month_day date{day};
  const hh_mm_ss time{micros - day};
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%04d-%02u-%02uT%02d:%02d:%02d.%06lldZ",
                static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
                static_cast<unsigned>(date.day()), static_cast<int>(time.hours().count()),
                static_cast<int>(time.minutes().count()), static_cast<int>(time.seconds().count()),
                static_cast<long long>(time.subseconds().count()));
  return buffer;
}

}  // namespace pulsebox::audit
