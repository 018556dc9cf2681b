// SHA-256 through OpenSSL's libcrypto (its low-level SHA256_* functions).
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace pulsebox::core {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::string_view bytes);
  // Lower-case hex digest; the object cannot be updated afterwards.
  std::string hex_digest();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(std::string_view bytes);

// HMAC-SHA256 (RFC 2104) on the same low-level functions: the key schedule
// is done once, and each MAC starts from copies of the two keyed states.
// (libcrypto's EVP_MAC would initialise its providers first, a cost every
// in-process run would pay.)
class HmacSha256 {
 public:
  explicit HmacSha256(std::string_view key);  // any length
  ~HmacSha256();
  HmacSha256(const HmacSha256&) = delete;
  HmacSha256& operator=(const HmacSha256&) = delete;

  // Lower-case hex MAC of a ‖ b.
  std::string hex_mac(std::string_view a, std::string_view b = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pulsebox::core
