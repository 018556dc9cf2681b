#include "http/bearer_token.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace pulsebox::http {
namespace {

using core::Error;
using core::ErrorKind;

constexpr std::size_t kMaxTokenFile = 4096;

Error refused(const std::filesystem::path& file, const std::string& why) {
  return Error(ErrorKind::kSecurity, "--token-file", file.string() + ": " + why);
}

}  // namespace

BearerToken::BearerToken(std::unique_ptr<core::HmacSha256> mac, std::string expected)
    : mac_(std::move(mac)), expected_mac_(std::move(expected)) {}

core::Result<BearerToken> BearerToken::load(const std::filesystem::path& file) {
  core::UniqueFd fd(::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    return Error(ErrorKind::kInvalidInput, "--token-file",
                 file.string() + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno("--token-file", file.string());
  if (!S_ISREG(st.st_mode)) return refused(file, "not a regular file");
  if (st.st_uid != ::geteuid()) {
    return refused(file, "owned by uid " + std::to_string(st.st_uid) +
                             ", not by the server's uid " + std::to_string(::geteuid()));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return refused(file, "its group or others may access it (chmod 600 " + file.string() + ")");
  }
  std::string token(kMaxTokenFile + 1, '\0');
  std::size_t length = 0;
  while (length < token.size()) {
    const ssize_t n = ::read(fd.get(), token.data() + length, token.size() - length);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("--token-file", file.string() + ": read");
    if (n == 0) break;
    length += static_cast<std::size_t>(n);
  }
  if (length > kMaxTokenFile) return refused(file, "longer than 4096 bytes: not a token");
  token.resize(length);
  if (token.ends_with('\n')) token.pop_back();
  if (token.ends_with('\r')) token.pop_back();
  if (token.find_first_of("\r\n \t") != std::string::npos)
    return refused(file, "the token must be one line without blanks");
  if (token.size() < kMinTokenBytes) {
    return refused(file, "the token has " + std::to_string(token.size()) + " bytes; at least " +
                             std::to_string(kMinTokenBytes) +
                             " are needed (e.g. `openssl rand -hex 32 > FILE`)");
  }
  unsigned char key[32];
  if (RAND_bytes(key, sizeof key) != 1)
    return Error(ErrorKind::kInternal, "--token-file", "no random bytes for the token's MAC key");
  auto mac = std::make_unique<core::HmacSha256>(
      std::string_view(reinterpret_cast<const char*>(key), sizeof key));
  OPENSSL_cleanse(key, sizeof key);
  std::string expected = mac->hex_mac(token);
  OPENSSL_cleanse(token.data(), token.size());
  return BearerToken(std::move(mac), std::move(expected));
}

bool BearerToken::accepts(std::string_view authorization) const {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  }
  const std::string presented = mac_->hex_mac(authorization.substr(kScheme.size()));
  return presented.size() == expected_mac_.size() &&
         CRYPTO_memcmp(presented.data(), expected_mac_.data(), presented.size()) == 0;
}

}  // namespace pulsebox::http
