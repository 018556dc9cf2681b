// The server's bearer token (--token-file) and the constant-time check of
// the one a request presents.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/sha256.h"

namespace pulsebox::http {

inline constexpr std::size_t kMinTokenBytes = 32;

class BearerToken {
 public:
  // Refuses a file that is not a regular file owned by this user, that its
  // group or others may read or write, or whose token (one line; the final
  // newline is not part of it) is shorter than kMinTokenBytes.
  static core::Result<BearerToken> load(const std::filesystem::path& file);

  // Whether `authorization` (the header's value) is "Bearer <the token>".
  bool accepts(std::string_view authorization) const;

 private:
  BearerToken(std::unique_ptr<core::HmacSha256> mac, std::string expected);

  // Both sides are MACed under a random key and the MACs compared with
  // CRYPTO_memcmp: neither the token's bytes nor its length show in timing.
  std::unique_ptr<core::HmacSha256> mac_;
  std::string expected_mac_;
};

}  // namespace pulsebox::http
