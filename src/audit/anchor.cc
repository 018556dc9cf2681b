#include "audit/anchor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/sha256.h"

namespace pulsebox::audit {

using core::Error;
using core::ErrorKind;
namespace fs = std::filesystem;

namespace {

// Each copy is one line padded to this size: the body and its MAC fit in
// about 360 bytes.
constexpr std::size_t kSlot = 512;
// The MAC of an anchor never equals one of a record: other bytes first.
constexpr std::string_view kDomain = "pulsebox audit anchor\n";
constexpr std::string_view kMacKey = ",\"mac\":\"";

Error anchor_error(const fs::path& path, const std::string& why) {
  return Error(ErrorKind::kSecurity, "audit", "audit anchor " + path.string() + ": " + why);
}

std::string anchor_body(const std::string& log_id, const std::string& key_id, const Anchor& a) {
  return "{\"log\":\"" + log_id + "\",\"generation\":" + std::to_string(a.generation) +
         ",\"records\":" + std::to_string(a.records) + ",\"bytes\":" + std::to_string(a.bytes) +
         ",\"tip\":\"" + a.tip + "\",\"keyed_from\":" + std::to_string(a.keyed_from) +
         ",\"key_id\":\"" + key_id + "\"";
}

}  // namespace

std::string log_identity(const fs::path& log) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(log, ec);
  fs::path dir = fs::weakly_canonical(absolute.parent_path(), ec);
  if (ec) dir = absolute.parent_path().lexically_normal();
  return core::sha256_hex((dir / absolute.filename()).string());
}

fs::path anchor_path(const Key& key, const std::string& log_id) {
  return key.anchor_directory() / log_id;
}

core::Result<AnchorFile> AnchorFile::open(const fs::path& path, bool create) {
  if (create) PB_CHECK(make_private_directories(path.parent_path()));
  PB_CHECK(check_private_directory(path.parent_path(), "the audit anchors' directory"));
  const int flags = O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (create ? O_RDWR | O_CREAT : O_RDONLY);
  AnchorFile anchor;
  anchor.path_ = path;
  anchor.fd_ = core::UniqueFd(::open(path.c_str(), flags, 0600));
  if (!anchor.fd_ && errno == ELOOP) return anchor_error(path, "is a symbolic link: refusing it");
  if (!anchor.fd_)
    return Error::from_errno("audit", "cannot open the audit anchor " + path.string());
  struct stat st {};
  if (::fstat(anchor.fd_.get(), &st) != 0)
    return Error::from_errno("audit", "stat " + path.string());
  if (!S_ISREG(st.st_mode)) return anchor_error(path, "is not a regular file");
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    return anchor_error(path, "belongs to another user or others can read or write it");
  }
  if (st.st_size > static_cast<off_t>(2 * kSlot)) {
    return anchor_error(path, "is " + std::to_string(st.st_size) + " bytes: not an anchor");
  }
  return anchor;
}

core::Result<std::optional<Anchor>> AnchorFile::read(const Key& key,
                                                     const std::string& log_id) const {
  std::string data(2 * kSlot + 1, '\0');
  const ssize_t got = ::pread(fd_.get(), data.data(), data.size(), 0);
  if (got < 0) return Error::from_errno("audit", "reading the audit anchor " + path_.string());
  data.resize(static_cast<std::size_t>(got));
  if (data.empty()) return std::optional<Anchor>();
  if (data.size() > 2 * kSlot) return anchor_error(path_, "longer than an anchor");
  std::optional<Anchor> newest;
  std::string other_key;
  for (std::size_t at = 0; at < data.size(); at += kSlot) {
    std::string_view slot = std::string_view(data).substr(at, kSlot);
    while (!slot.empty() && (slot.back() == ' ' || slot.back() == '\n' || slot.back() == '\0'))
      slot.remove_suffix(1);
    const std::size_t mac_at = slot.rfind(kMacKey);
    if (mac_at == std::string_view::npos) continue;  // never written, or torn
    try {
      const auto value = nlohmann::json::parse(slot);
      Anchor anchor;
      anchor.generation = value.at("generation").get<std::uint64_t>();
      anchor.records = value.at("records").get<std::uint64_t>();
      anchor.bytes = value.at("bytes").get<std::uint64_t>();
      anchor.tip = value.at("tip").get<std::string>();
      anchor.keyed_from = value.at("keyed_from").get<std::uint64_t>();
      const std::string key_id = value.at("key_id").get<std::string>();
      if (key_id != key.id()) {
        other_key = key_id;
        continue;
      }
      if ((!log_id.empty() && value.at("log").get<std::string>() != log_id) ||
          !key.matches(kDomain, slot.substr(0, mac_at), value.at("mac").get<std::string>())) {
        continue;
      }
      if (!newest || anchor.generation > newest->generation) newest = std::move(anchor);
    } catch (const nlohmann::json::exception&) {
      continue;  // a torn copy: the other one counts
    }
  }
  if (newest) return newest;
  if (!other_key.empty()) {
    return anchor_error(path_, "was made with another key (key id " + other_key + "; this key is " +
                                   key.id() + ")");
  }
  return anchor_error(path_, "damaged or forged: no copy of it has a valid MAC for this log");
}

core::Status AnchorFile::write(const Key& key, const std::string& log_id, const Anchor& anchor,
                               bool sync) const {
  const std::string body = anchor_body(log_id, key.id(), anchor);
  const std::string mac = key.mac(kDomain, body);
  if (mac.empty()) return Error(ErrorKind::kInternal, "audit", "HMAC failed");
  std::string slot = body + std::string(kMacKey) + mac + "\"}";
  if (slot.size() >= kSlot) return Error(ErrorKind::kInternal, "audit", "anchor too long");
  slot.resize(kSlot - 1, ' ');
  slot.push_back('\n');
  const off_t at = static_cast<off_t>((anchor.generation % 2) * kSlot);
  if (::pwrite(fd_.get(), slot.data(), slot.size(), at) != static_cast<ssize_t>(slot.size())) {
    return Error::from_errno("audit", "writing the audit anchor " + path_.string());
  }
  if (sync && ::fdatasync(fd_.get()) != 0) {
    return Error::from_errno("audit", "fdatasync " + path_.string());
  }
  return core::ok_status();
}

}  // namespace pulsebox::audit
