// Safe, race-free reads of workspace files on behalf of an agent.
//
// Usage:
//   pulsebox::PathValidator validator("/home/me/project");
//   std::string bytes = validator.read("src/main.cc");   // throws on any problem
//
// Rules:
//  - paths are relative to the workspace; absolute paths, "..", empty
//    components are refused lexically, and so are NUL bytes and backslashes
//    (which are Windows separators in the reference's threat model);
//  - the path is then resolved by the kernel with
//    openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so no symlink, ".."
//    race or /proc magic link can leave the workspace. Where openat2 is not
//    available, each component is opened with O_NOFOLLOW instead (stricter:
//    that walk refuses every symlink);
//  - only regular files are read, up to max_file_size bytes (50 MiB by
//    default); the result is the file's bytes, never decoded text.
//  - read_external() reads an absolute path inside one of the configured
//    allowed_external_reads roots with the same guarantees, relative to that root.
//
// Failures throw SandboxSecurityError (the path would escape, or is not a
// regular file), SandboxResourceError (too large) or SandboxError (I/O).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

class PULSEBOX_API PathValidator {
 public:
  static constexpr std::uint64_t kDefaultMaxFileSize = 50ull << 20;

  struct Options {
    std::vector<std::filesystem::path> allowed_external_reads;
    std::uint64_t max_file_size = kDefaultMaxFileSize;
    // Test seam: use the O_NOFOLLOW walk even where openat2 exists.
    bool force_component_walk = false;
  };

  explicit PathValidator(std::filesystem::path workspace_root);
  PathValidator(std::filesystem::path workspace_root, Options options);

  // The normalised relative path ("a/b" for "./a//b"); throws SandboxSecurityError.
  std::string validate(std::string_view relative_path) const;
  // The file's bytes.
  std::string read(std::string_view relative_path) const;
  std::string read_external(const std::filesystem::path& absolute_path) const;

  const std::filesystem::path& workspace_root() const { return root_; }

 private:
  std::filesystem::path root_;
  Options options_;
};

}  // namespace pulsebox
