// The audit log's hash chain, shared by the writer and the verifier.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pulsebox::audit {

extern const std::string kGenesisHash;  // 64 zeros: the `prev` of line 1

// SHA-256 hex of prev followed by body.
std::string chain_hash(std::string_view prev, std::string_view body);

struct SplitLine {
  std::string_view body;  // the line up to `,"hash":"...`
  std::string_view hash;
};
// Splits a line into its hashed body and the hash; nullopt if malformed.
std::optional<SplitLine> split_hashed_line(std::string_view line);

std::string utc_timestamp();

}  // namespace pulsebox::audit
