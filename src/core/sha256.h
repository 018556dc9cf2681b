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

}  // namespace pulsebox::core
