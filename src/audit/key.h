// The audit log's key: a file of 32 random bytes outside the workspace,
// readable only by its owner, made on first use; records and anchors carry
// HMAC-SHA256 under it (core::HmacSha256).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "pulsebox/audit.h"

namespace pulsebox::audit {

inline constexpr std::size_t kKeyBytes = 32;

// Where the key is looked for, read from an environment (a server passes
// its client's): PULSEBOX_AUDIT_KEY (chosen), else
// $XDG_STATE_HOME/pulsebox/audit.key, else $HOME/.local/state/pulsebox/audit.key.
AuditKeyLocation key_location(const std::function<const char*(const char*)>& getenv);

class Key {
 public:
  // The key at `file`. With `create`, a missing key (and its directories,
  // mode 0700) is made. Refuses a symbolic link, anything but a regular
  // file of 32 bytes, a file of another user or one its group or others
  // can read, and a directory others can write (they could replace it).
  static core::Result<std::unique_ptr<Key>> load(const std::filesystem::path& file, bool create);
  // A key from its bytes (tests); `file` only names it.
  static core::Result<std::unique_ptr<Key>> from_bytes(std::string_view bytes,
                                                       std::filesystem::path file);
  ~Key();
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;

  // HMAC-SHA256 of `a` followed by `b`, lower-case hex.
  std::string mac(std::string_view a, std::string_view b) const;
  // Whether `mac` is that HMAC, compared in constant time.
  bool matches(std::string_view a, std::string_view b, std::string_view mac) const;
  // 16 hex digits that name the key in records without revealing it.
  const std::string& id() const { return id_; }
  const std::filesystem::path& file() const { return file_; }
  // Where the anchors of the logs kept with this key live: beside it.
  std::filesystem::path anchor_directory() const { return anchor_directory_of(file_); }
  static std::filesystem::path anchor_directory_of(const std::filesystem::path& key_file) {
    return key_file.parent_path() / "audit-anchors";
  }

 private:
  Key() = default;
  struct Context;
  std::unique_ptr<Context> context_;
  std::string id_;
  std::filesystem::path file_;
};

// Creates `dir` and its missing parents with mode 0700.
core::Status make_private_directories(const std::filesystem::path& dir);
// `dir` is a directory of this user or root that neither its group nor
// others can write; `what` names it in the error ("the audit key's directory").
core::Status check_private_directory(const std::filesystem::path& dir, std::string_view what);

}  // namespace pulsebox::audit
