#include "core/sha256.h"

// The low-level SHA256_* functions run libcrypto's (assembly) block function
// directly. The EVP interface would first initialise OpenSSL's providers and
// read openssl.cnf: about 2 ms per process, a tenth of a sandbox launch.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <array>

namespace pulsebox::core {

struct Sha256::Impl {
  SHA256_CTX ctx;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  SHA256_Init(&impl_->ctx);
}

Sha256::~Sha256() = default;

void Sha256::update(std::string_view bytes) {
  SHA256_Update(&impl_->ctx, bytes.data(), bytes.size());
}

std::string Sha256::hex_digest() {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256_Final(digest.data(), &impl_->ctx);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(digest.size() * 2);
  for (unsigned char byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0xf]);
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return hasher.hex_digest();
}

}  // namespace pulsebox::core
