#include "audit/key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/unique_fd.h"

namespace pulsebox::audit {

using core::Error;
using core::ErrorKind;
namespace fs = std::filesystem;

namespace {

Error key_error(const fs::path& file, const std::string& why) {
  return Error(ErrorKind::kSecurity, "audit", "audit key " + file.string() + ": " + why);
}

core::Status fill_random(unsigned char* data, std::size_t size) {
  std::size_t filled = 0;
  while (filled < size) {
    const ssize_t got = ::getrandom(data + filled, size - filled, 0);
    if (got > 0) {
      filled += static_cast<std::size_t>(got);
    } else if (got < 0 && errno != EINTR) {
      return Error::from_errno("audit", "getrandom for a new audit key");
    }
  }
  return core::ok_status();
}

// Writes a new key under a temporary name and links it into place: a
// concurrent process either made the key first (EEXIST: that one is used)
// or finds this one whole, never half written.
core::Status create_key(const fs::path& file) {
  const fs::path temporary =
      file.parent_path() / ("." + file.filename().string() + ".new-" + core::random_hex(16));
  core::UniqueFd fd(
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return Error::from_errno("audit", "cannot create the audit key " + temporary.string());
  unsigned char bytes[kKeyBytes];
  auto status = fill_random(bytes, sizeof bytes);
  if (status.ok()) {
    status = core::write_all(fd.get(),
                             std::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes),
                             "the audit key");
  }
  OPENSSL_cleanse(bytes, sizeof bytes);
  if (status.ok() && ::fsync(fd.get()) != 0) {
    status = Error::from_errno("audit", "fsync " + temporary.string());
  }
  if (status.ok() && ::link(temporary.c_str(), file.c_str()) != 0 && errno != EEXIST) {
    status = Error::from_errno("audit", "cannot create the audit key " + file.string());
  }
  ::unlink(temporary.c_str());
  if (!status.ok()) return status;
  if (auto dir = core::open_directory(file.parent_path()); dir.ok()) (void)::fsync(dir->get());
  return core::ok_status();
}

}  // namespace

struct Key::Context {
  explicit Context(std::string_view key) : hmac(key) {}
  core::HmacSha256 hmac;
};

AuditKeyLocation key_location(const std::function<const char*(const char*)>& getenv) {
  AuditKeyLocation location;
  if (const char* chosen = getenv("PULSEBOX_AUDIT_KEY"); chosen != nullptr && *chosen != '\0') {
    std::error_code ec;
    location.file = fs::absolute(chosen, ec);
    if (ec) location.file = chosen;
    location.chosen = true;
    return location;
  }
  std::string variable = "XDG_STATE_HOME";
  const char* base = getenv("XDG_STATE_HOME");
  fs::path below = "pulsebox";
  if (base == nullptr || base[0] != '/') {
    variable = "HOME";
    base = getenv("HOME");
    below = ".local/state/pulsebox";
  }
  if (base == nullptr || base[0] != '/') {
    location.unavailable = "no place for the audit key (neither XDG_STATE_HOME nor HOME is set)";
    return location;
  }
  struct stat st {};
  if (::stat(base, &st) != 0 || !S_ISDIR(st.st_mode)) {
    location.unavailable =
        "no place for the audit key (" + variable + " " + base + " is not a directory)";
    return location;
  }
  location.file = fs::path(base) / below / "audit.key";
  return location;
}

core::Status make_private_directories(const fs::path& dir) {
  // Made by an earlier run nearly always: one call instead of one per part.
  if (::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) return core::ok_status();
  fs::path at;
  for (const auto& part : dir) {
    at /= part;
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) {
      return Error::from_errno("audit", "cannot create " + at.string());
    }
  }
  return core::ok_status();
}

core::Status check_private_directory(const fs::path& dir, std::string_view what) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return Error::from_errno("audit", std::string(what) + " " + dir.string());
  }
  const std::string name = std::string(what) + " " + dir.string();
  if (!S_ISDIR(st.st_mode))
    return Error(ErrorKind::kSecurity, "audit", name + " is not a directory");
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return Error(ErrorKind::kSecurity, "audit",
                 name + " belongs to uid " + std::to_string(st.st_uid) +
                     ", not to this user (uid " + std::to_string(::geteuid()) +
                     "): keep the audit key in a directory of yours");
  }
  if ((st.st_mode & 022) != 0) {
    return Error(ErrorKind::kSecurity, "audit",
                 name + " is writable by others (mode " + core::octal_mode(st.st_mode & 07777) +
                     "): they could replace the audit key; use a private directory "
                     "(chmod go-w, or another PULSEBOX_AUDIT_KEY)");
  }
  return core::ok_status();
}

core::Result<std::unique_ptr<Key>> Key::load(const fs::path& file, bool create) {
  const fs::path dir = file.parent_path();
  if (create) PB_CHECK(make_private_directories(dir));
  PB_CHECK(check_private_directory(dir, "the audit key's directory"));
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
  core::UniqueFd fd(::open(file.c_str(), kFlags));
  if (!fd && errno == ENOENT && create) {
    PB_CHECK(create_key(file));
    fd = core::UniqueFd(::open(file.c_str(), kFlags));
  }
  if (!fd && errno == ELOOP) {
    return key_error(file,
                     "is a symbolic link: refusing it (name the key file itself, so that nobody "
                     "can point the link elsewhere)");
  }
  if (!fd) return Error::from_errno("audit", "cannot open the audit key " + file.string());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno("audit", "stat " + file.string());
  if (!S_ISREG(st.st_mode)) return key_error(file, "is not a regular file");
  if (st.st_uid != ::geteuid()) {
    return key_error(file, "belongs to uid " + std::to_string(st.st_uid) +
                               ", not to this user (uid " + std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    return key_error(file, "its group or others can read or write it (mode " +
                               core::octal_mode(st.st_mode & 07777) + "): chmod 600 " +
                               file.string());
  }
  if (st.st_size != static_cast<off_t>(kKeyBytes)) {
    return key_error(file, "is " + std::to_string(st.st_size) +
                               " bytes, not 32: not an audit key (keep it, and name another "
                               "file with PULSEBOX_AUDIT_KEY)");
  }
  PB_TRY(bytes, core::read_all(fd.get(), kKeyBytes, "the audit key " + file.string()));
  auto key = from_bytes(bytes, file);
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

core::Result<std::unique_ptr<Key>> Key::from_bytes(std::string_view bytes, fs::path file) {
  if (bytes.size() != kKeyBytes) return key_error(file, "not 32 bytes");
  auto key = std::unique_ptr<Key>(new Key());
  key->file_ = std::move(file);
  key->context_ = std::make_unique<Context>(bytes);
  core::Sha256 id;
  id.update("pulsebox audit key id\n");
  id.update(bytes);
  key->id_ = id.hex_digest().substr(0, 16);
  return key;
}

Key::~Key() = default;

std::string Key::mac(std::string_view a, std::string_view b) const {
  return context_->hmac.hex_mac(a, b);
}

bool Key::matches(std::string_view a, std::string_view b, std::string_view mac) const {
  const std::string expected = this->mac(a, b);
  return !expected.empty() && expected.size() == mac.size() &&
         CRYPTO_memcmp(expected.data(), mac.data(), mac.size()) == 0;
}

}  // namespace pulsebox::audit
