#include "pulsebox/path_validator.h"

#include <fcntl.h>

#include "core/fs.h"
#include "core/throw_error.h"
#include "workspace/safe_open.h"

namespace pulsebox {

using core::Error;
using core::ErrorKind;

PathValidator::PathValidator(std::filesystem::path workspace_root)
    : PathValidator(std::move(workspace_root), Options{}) {}

PathValidator::PathValidator(std::filesystem::path workspace_root, Options options)
    : root_(std::move(workspace_root)), options_(std::move(options)) {}

std::string PathValidator::validate(std::string_view relative_path) const {
  return core::value_or_throw(workspace::check_relative_path(relative_path));
}

namespace {

core::Result<std::string> read_beneath(const std::filesystem::path& root, std::string_view path,
                                       const PathValidator::Options& options) {
  PB_TRY(relative, workspace::check_relative_path(path));
  PB_TRY(root_fd, core::open_directory(root));
  const auto mode = options.force_component_walk ? workspace::ResolveMode::kComponentWalk
                                                 : workspace::ResolveMode::kAuto;
  // O_NONBLOCK: opening a FIFO planted in the workspace must not hang; the
  // fstat check below then refuses it.
  PB_TRY(fd, workspace::open_beneath(root_fd.get(), relative, O_RDONLY | O_NONBLOCK, mode));
  return workspace::read_regular_file(fd.get(), options.max_file_size, relative);
}

}  // namespace

std::string PathValidator::read(std::string_view relative_path) const {
  return core::value_or_throw(read_beneath(root_, relative_path, options_));
}

std::string PathValidator::read_external(const std::filesystem::path& absolute_path) const {
  if (!absolute_path.is_absolute()) {
    core::throw_error(
        Error(ErrorKind::kSecurity, "path",
              "refusing \"" + absolute_path.string() + "\": expected an absolute path"));
  }
  // A lexical prefix test only picks the root; the remainder (with any ".."
  // still in it, so it is refused) is then resolved beneath that root.
  const std::string raw = absolute_path.string();
  for (const auto& allowed : options_.allowed_external_reads) {
    std::string base = allowed.lexically_normal().string();
    while (!base.empty() && base.back() == '/')
      base.pop_back();
    if (raw.size() > base.size() + 1 && raw.compare(0, base.size(), base) == 0 &&
        raw[base.size()] == '/') {
      return core::value_or_throw(
          read_beneath(base.empty() ? "/" : base, raw.substr(base.size() + 1), options_));
    }
  }
  core::throw_error(Error(ErrorKind::kSecurity, "path",
                          "refusing \"" + absolute_path.string() +
                              "\": outside the workspace and every allowed external read root"));
}

}  // namespace pulsebox
