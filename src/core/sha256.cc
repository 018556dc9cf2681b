#include "core/sha256.h"

// The low-level SHA256_* functions run libcrypto's (assembly) block function
// directly. The EVP interface would first initialise OpenSSL's providers and
// read openssl.cnf, a cost every process would pay (docs/benchmarks.md).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <utility>

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

namespace {

std::string hex_of(const unsigned char* bytes, std::size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xf]);
  }
  return out;
}

}  // namespace

std::string Sha256::hex_digest() {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256_Final(digest.data(), &impl_->ctx);
  return hex_of(digest.data(), digest.size());
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 hasher;
  hasher.update(bytes);
  return hasher.hex_digest();
}

struct HmacSha256::Impl {
  SHA256_CTX inner;  // after (key ^ ipad)
  SHA256_CTX outer;  // after (key ^ opad)
};

HmacSha256::HmacSha256(std::string_view key) : impl_(std::make_unique<Impl>()) {
  std::array<unsigned char, SHA256_CBLOCK> block{};
  if (key.size() > block.size()) {
    // Not SHA256(): in OpenSSL 3 the one-shot goes through EVP.
    SHA256_CTX hashed;
    SHA256_Init(&hashed);
    SHA256_Update(&hashed, key.data(), key.size());
    SHA256_Final(block.data(), &hashed);
  } else {
    std::copy(key.begin(), key.end(), block.begin());
  }
  std::array<unsigned char, SHA256_CBLOCK> pad{};
  for (auto [state, byte] : {std::pair{&impl_->inner, 0x36}, std::pair{&impl_->outer, 0x5c}}) {
    for (std::size_t i = 0; i < block.size(); ++i)
      pad[i] = static_cast<unsigned char>(block[i] ^ byte);
    SHA256_Init(state);
    SHA256_Update(state, pad.data(), pad.size());
  }
  OPENSSL_cleanse(block.data(), block.size());
  OPENSSL_cleanse(pad.data(), pad.size());
}

HmacSha256::~HmacSha256() {
  OPENSSL_cleanse(impl_.get(), sizeof(Impl));
}

std::string HmacSha256::hex_mac(std::string_view a, std::string_view b) const {
  SHA256_CTX inner = impl_->inner;
  SHA256_Update(&inner, a.data(), a.size());
  SHA256_Update(&inner, b.data(), b.size());
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256_Final(digest.data(), &inner);
  SHA256_CTX outer = impl_->outer;
  SHA256_Update(&outer, digest.data(), digest.size());
  SHA256_Final(digest.data(), &outer);
  return hex_of(digest.data(), digest.size());
}

}  // namespace pulsebox::core
