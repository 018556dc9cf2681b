// extract_archive: a hostile tar stream checked entry by entry and written
// beneath an empty directory without following anything.
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <unordered_map>

#include "archive/utf8_locale.h"
#include "archive/workspace_archive.h"
#include "core/fs.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/unique_fd.h"

namespace pulsebox::archive {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

constexpr std::size_t kExtractChunkBytes = 1 << 16;
// Bytes after the end-of-archive blocks (a writer's block padding) are read
// so the sha256 covers the whole stream, but only this many.
constexpr std::uint64_t kMaxTrailingBytes = 1 << 20;
constexpr std::uint64_t kEndOfArchiveBytes = 1024;
// How much of a hostile name an error message shows.
constexpr std::size_t kShownNameBytes = 256;

struct ReadArchiveFree {
  void operator()(::archive* handle) const { archive_read_free(handle); }
};

std::string shown(std::string_view name) {
  if (name.size() <= kShownNameBytes) return core::quote_name(name);
  return core::quote_name(name.substr(0, kShownNameBytes)) + "... (" + std::to_string(name.size()) +
         " bytes)";
}

Error entry_error(ErrorKind kind, std::string_view name, const std::string& why) {
  return Error(kind, "archive", "archive entry " + shown(name) + ": " + why);
}

std::string type_name(unsigned type) {
  switch (type) {
    case AE_IFCHR:
      return "a character device";
    case AE_IFBLK:
      return "a block device";
    case AE_IFIFO:
      return "a fifo";
    case AE_IFSOCK:
      return "a socket";
    default:
      return "of an unknown type (" + std::to_string(type) + ")";
  }
}

std::vector<std::string> split_components(std::string_view path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    parts.emplace_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::string join_components(const std::vector<std::string>& parts, std::size_t count) {
  std::string joined;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) joined += '/';
    joined += parts[i];
  }
  return joined;
}

// Empty and "." components are dropped ("./a/" is "a"); ".." and absolute
// names are refused.
core::Result<std::vector<std::string>> check_name(std::string_view name,
                                                  const ExtractLimits& limits) {
  if (name.size() > limits.max_path_bytes) {
    return entry_error(ErrorKind::kInvalidInput, name,
                       "the name is " + std::to_string(name.size()) + " bytes, over the limit of " +
                           std::to_string(limits.max_path_bytes));
  }
  if (name.empty()) return entry_error(ErrorKind::kSecurity, name, "the name is empty");
  if (name.front() == '/') {
    return entry_error(ErrorKind::kSecurity, name, "absolute paths are not allowed");
  }
  std::vector<std::string> parts;
  for (auto& part : split_components(name)) {
    if (part == "..") {
      return entry_error(ErrorKind::kSecurity, name, "\"..\" components are not allowed");
    }
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
  }
  if (parts.empty()) {
    return entry_error(ErrorKind::kSecurity, name,
                       "the name is only \".\" or \"/\": it names the destination itself");
  }
  if (parts.size() > limits.max_depth) {
    return entry_error(ErrorKind::kInvalidInput, name,
                       std::to_string(parts.size()) + " components deep, over the limit of " +
                           std::to_string(limits.max_depth));
  }
  return parts;
}

// `target` of a symlink whose directory is `depth` components below the
// root: it may climb at most `depth` levels, and only before any name, since
// "a/../b" is lexically "b" but really the parent of wherever "a" leads.
core::Status check_symlink_target(std::string_view name, std::string_view target, std::size_t depth,
                                  const ExtractLimits& limits) {
  if (target.empty())
    return entry_error(ErrorKind::kSecurity, name, "the symlink's target is empty");
  if (target.size() > limits.max_path_bytes) {
    return entry_error(ErrorKind::kInvalidInput, name,
                       "the symlink's target is " + std::to_string(target.size()) +
                           " bytes, over the limit of " + std::to_string(limits.max_path_bytes));
  }
  if (target.front() == '/') {
    return entry_error(ErrorKind::kSecurity, name,
                       "the symlink's target " + shown(target) + " is absolute");
  }
  std::size_t climbs = 0;
  bool seen_name = false;
  for (const auto& part : split_components(target)) {
    if (part.empty() || part == ".") continue;
    if (part != "..") {
      seen_name = true;
      continue;
    }
    if (seen_name) {
      return entry_error(ErrorKind::kSecurity, name,
                         "the symlink's target " + shown(target) +
                             " has \"..\" after a name (only leading \"../\" is allowed)");
    }
    if (++climbs > depth) {
      return entry_error(ErrorKind::kSecurity, name,
                         "the symlink's target " + shown(target) + " climbs out of the tree");
    }
  }
  return core::ok_status();
}

core::Status check_empty_directory(int fd, const std::filesystem::path& path) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) return Error::from_errno("archive", "dup of " + path.string());
  DIR* dir = ::fdopendir(copy.get());
  if (dir == nullptr) return Error::from_errno("archive", "listing " + path.string());
  copy.release();
  std::unique_ptr<DIR, int (*)(DIR*)> closer(dir, ::closedir);
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      return Error(ErrorKind::kInvalidInput, "archive",
                   "the destination " + path.string() + " is not empty (it holds " +
                       core::quote_name(name) + "): extract into a new, empty directory");
    }
  }
  return core::ok_status();
}

class Extractor {
 public:
  Extractor(const ArchiveSource& source, const ExtractLimits& limits)
      : source_(source), limits_(limits), buffer_(kExtractChunkBytes) {}

  core::Result<ExtractSummary> run(const std::filesystem::path& dest) {
    root_.reset(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root_) {
      const int err = errno;
      return Error(ErrorKind::kInvalidInput, "archive",
                   "the destination " + dest.string() +
                       " is not a directory (or is a symlink, or cannot be opened)",
                   err);
    }
    PB_CHECK(check_empty_directory(root_.get(), dest));

    handle_.reset(archive_read_new());
    if (!handle_) return Error(ErrorKind::kResource, "archive", "archive_read_new failed");
    ::archive* a = handle_.get();
    // Tar only (ustar, pax, GNU), uncompressed: no zip, cpio or filters.
    if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
        archive_read_open(a, this, nullptr, &Extractor::read_callback, nullptr) != ARCHIVE_OK) {
      return stream_error("the input is not a tar archive");
    }
    for (;;) {
      ::archive_entry* entry = nullptr;
      const int status = archive_read_next_header(a, &entry);
      if (status == ARCHIVE_EOF) break;
      if (status != ARCHIVE_OK) {
        return stream_error(last_name_.empty()
                                ? std::string("the input is not a readable tar archive")
                                : "the archive is damaged or truncated after the entry " +
                                      shown(last_name_));
      }
      PB_CHECK(extract_entry(entry));
    }
    PB_CHECK(drain_trailing_bytes());
    PB_CHECK(apply_directory_metadata());
    summary_.sha256 = hasher_.hex_digest();
    return std::move(summary_);
  }

 private:
  enum class Node { kDirectory, kImplicitDirectory, kFile, kSymlink };
  struct DirectoryMetadata {
    std::vector<std::string> parts;
    mode_t mode;
    time_t mtime;
    bool keep_mtime;
  };

  static la_ssize_t read_callback(::archive*, void* self_pointer, const void** buffer) {
    auto* self = static_cast<Extractor*>(self_pointer);
    auto piece = self->next_piece();
    if (!piece.ok()) {
      self->source_error_ = std::move(piece).error();
      return -1;
    }
    *buffer = piece->data();
    return static_cast<la_ssize_t>(piece->size());
  }

  core::Result<std::string_view> next_piece() {
    if (at_end_) return std::string_view();
    PB_TRY(piece, source_());
    if (piece.empty()) at_end_ = true;
    hasher_.update(piece);
    const std::size_t last_non_zero = piece.find_last_not_of('\0');
    trailing_zeros_ = last_non_zero == std::string_view::npos ? trailing_zeros_ + piece.size()
                                                              : piece.size() - last_non_zero - 1;
    return piece;
  }

  core::Status drain_trailing_bytes() {
    std::uint64_t trailing = 0;
    while (!at_end_) {
      PB_TRY(piece, next_piece());
      trailing += piece.size();
      if (trailing > kMaxTrailingBytes) {
        return Error(ErrorKind::kInvalidInput, "archive",
                     "more than " + std::to_string(kMaxTrailingBytes) +
                         " bytes follow the end of the archive");
      }
    }
    // libarchive takes a stream cut between two entries for a whole one;
    // tar's end-of-archive marker (two zero blocks, then zero padding) is
    // what tells them apart.
    if (trailing_zeros_ < kEndOfArchiveBytes) {
      return Error(ErrorKind::kInvalidInput, "archive",
                   "the archive stops after the entry " + shown(last_name_) +
                       " without tar's end-of-archive blocks: it is truncated");
    }
    return core::ok_status();
  }

  Error stream_error(const std::string& what) {
    if (source_error_) return std::move(*source_error_).with_context("reading the archive");
    const char* message = archive_error_string(handle_.get());
    return Error(ErrorKind::kInvalidInput, "archive",
                 what + ": " + (message != nullptr ? message : "libarchive failed"));
  }

  core::Status count_entry(std::string_view name) {
    if (++entries_ > limits_.max_entries) {
      return entry_error(ErrorKind::kResource, name,
                         "the archive has more than " + std::to_string(limits_.max_entries) +
                             " entries (parent directories it leaves out count too)");
    }
    return core::ok_status();
  }

  core::Status extract_entry(::archive_entry* entry) {
    const char* raw_name = archive_entry_pathname(entry);
    if (raw_name == nullptr) {
      return Error(ErrorKind::kInvalidInput, "archive",
                   "archive entry " + std::to_string(entries_ + 1) + " (after " +
                       shown(last_name_) + ") has no name libarchive can read");
    }
    const std::string name(raw_name);
    last_name_ = name;
    PB_CHECK(count_entry(name));
    PB_TRY(parts, check_name(name, limits_));
    if (const char* target = archive_entry_hardlink(entry)) {
      return entry_error(ErrorKind::kSecurity, name,
                         "hard links (here to " + shown(target) + ") are not accepted");
    }
    const unsigned type = archive_entry_filetype(entry);
    if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
      return entry_error(ErrorKind::kSecurity, name, "it is " + type_name(type));
    }
    const std::string path = join_components(parts, parts.size());
    if (auto existing = nodes_.find(path); existing != nodes_.end()) {
      if (type == AE_IFDIR && existing->second == Node::kImplicitDirectory) {
        existing->second = Node::kDirectory;
        directories_.push_back({parts, permissions(entry), archive_entry_mtime(entry), true});
        return core::ok_status();
      }
      return entry_error(ErrorKind::kInvalidInput, name, "a duplicate of an earlier entry");
    }
    // Checks of the entry itself come before its parents are made.
    const char* target = archive_entry_symlink(entry);
    if (type == AE_IFLNK) {
      PB_CHECK(
          check_symlink_target(name, target != nullptr ? target : "", parts.size() - 1, limits_));
    }
    if (type == AE_IFREG) {
      const la_int64_t declared = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : 0;
      if (declared < 0) return entry_error(ErrorKind::kInvalidInput, name, "a negative size");
      if (static_cast<std::uint64_t>(declared) > limits_.max_total_bytes - summary_.bytes) {
        return too_many_bytes(name);
      }
    }
    PB_TRY(parent_fd, open_parent(name, parts));
    const std::string& last = parts.back();
    switch (type) {
      case AE_IFDIR:
        if (::mkdirat(parent_fd, last.c_str(), 0700) != 0) return create_failed(name);
        nodes_.emplace(path, Node::kDirectory);
        directories_.push_back({parts, permissions(entry), archive_entry_mtime(entry), true});
        ++summary_.directories;
        return core::ok_status();
      case AE_IFLNK: {
        if (::symlinkat(target, parent_fd, last.c_str()) != 0) return create_failed(name);
        const timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(entry), 0}};
        ::utimensat(parent_fd, last.c_str(), times, AT_SYMLINK_NOFOLLOW);  // best effort
        nodes_.emplace(path, Node::kSymlink);
        ++summary_.symlinks;
        return core::ok_status();
      }
      default:
        PB_CHECK(extract_file(entry, name, parent_fd, last));
        nodes_.emplace(path, Node::kFile);
        ++summary_.files;
        return core::ok_status();
    }
  }

  static mode_t permissions(::archive_entry* entry) {
    return archive_entry_perm(entry) & 0777;  // setuid, setgid, sticky stripped
  }

  Error create_failed(std::string_view name) {
    if (errno == EEXIST) {
      return entry_error(ErrorKind::kInvalidInput, name, "it exists already (a duplicate entry)");
    }
    return Error::from_errno("archive", "creating archive entry " + shown(name));
  }

  core::Status extract_file(::archive_entry* entry, std::string_view name, int parent_fd,
                            const std::string& last) {
    UniqueFd fd(::openat(parent_fd, last.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600));
    if (!fd) return create_failed(name);
    for (;;) {
      const la_ssize_t got = archive_read_data(handle_.get(), buffer_.data(), buffer_.size());
      if (got == 0) break;
      if (got < 0) return stream_error("reading the content of the entry " + shown(name));
      if (static_cast<std::uint64_t>(got) > limits_.max_total_bytes - summary_.bytes) {
        return too_many_bytes(name);
      }
      summary_.bytes += static_cast<std::uint64_t>(got);
      PB_CHECK(core::write_all(fd.get(), std::string_view(buffer_.data(), static_cast<size_t>(got)),
                               "archive entry " + shown(name)));
    }
    if (::fchmod(fd.get(), permissions(entry)) != 0) {
      return Error::from_errno("archive", "chmod of archive entry " + shown(name));
    }
    const timespec times[2] = {{0, UTIME_OMIT}, {archive_entry_mtime(entry), 0}};
    if (::futimens(fd.get(), times) != 0) {
      return Error::from_errno("archive", "setting the mtime of archive entry " + shown(name));
    }
    return core::ok_status();
  }

  Error too_many_bytes(std::string_view name) {
    return entry_error(
        ErrorKind::kResource, name,
        "the archive's files hold more than " + std::to_string(limits_.max_total_bytes) + " bytes");
  }

  // The directory that will hold the entry, opened (O_PATH) one component
  // at a time with O_NOFOLLOW; directories the archive left out are made.
  core::Result<int> open_parent(std::string_view name, const std::vector<std::string>& parts) {
    const std::string parent = join_components(parts, parts.size() - 1);
    if (parent_fd_ && parent == parent_path_) return parent_fd_.get();
    UniqueFd current(::fcntl(root_.get(), F_DUPFD_CLOEXEC, 0));
    if (!current) return Error::from_errno("archive", "dup of the destination");
    std::string prefix;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      if (i > 0) prefix += '/';
      prefix += parts[i];
      auto node = nodes_.find(prefix);
      if (node == nodes_.end()) {
        PB_CHECK(count_entry(name));
        if (::mkdirat(current.get(), parts[i].c_str(), 0700) != 0) {
          return Error::from_errno(
              "archive", "creating " + shown(prefix) + " for archive entry " + shown(name));
        }
        nodes_.emplace(prefix, Node::kImplicitDirectory);
        directories_.push_back({split_components(prefix), 0755, 0, false});
        ++summary_.directories;
      } else if (node->second == Node::kSymlink) {
        return entry_error(ErrorKind::kSecurity, name,
                           "it lies beneath " + shown(prefix) + ", a symlink extracted earlier");
      } else if (node->second == Node::kFile) {
        return entry_error(ErrorKind::kInvalidInput, name,
                           "it lies beneath " + shown(prefix) + ", a file extracted earlier");
      }
      UniqueFd next(
          ::openat(current.get(), parts[i].c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next) {
        if (errno == ELOOP || errno == ENOTDIR) {
          return entry_error(ErrorKind::kSecurity, name,
                             shown(prefix) + " is not a directory in the destination");
        }
        return Error::from_errno("archive", "opening " + shown(prefix));
      }
      current = std::move(next);
    }
    parent_path_ = parent;
    parent_fd_ = std::move(current);
    return parent_fd_.get();
  }

  // Modes and mtimes of directories last: a read-only directory must still
  // take its entries, and each entry created changes its directory's mtime.
  core::Status apply_directory_metadata() {
    parent_fd_.reset();
    std::stable_sort(directories_.begin(), directories_.end(),
                     [](const auto& a, const auto& b) { return a.parts.size() > b.parts.size(); });
    for (const auto& directory : directories_) {
      const std::string path = join_components(directory.parts, directory.parts.size());
      PB_TRY(parent_fd, open_parent(path, directory.parts));
      UniqueFd fd(::openat(parent_fd, directory.parts.back().c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd)
        return Error::from_errno("archive", "opening the extracted directory " + shown(path));
      if (::fchmod(fd.get(), directory.mode) != 0) {
        return Error::from_errno("archive", "chmod of the extracted directory " + shown(path));
      }
      if (directory.keep_mtime) {
        const timespec times[2] = {{0, UTIME_OMIT}, {directory.mtime, 0}};
        if (::futimens(fd.get(), times) != 0) {
          return Error::from_errno("archive", "setting the mtime of " + shown(path));
        }
      }
    }
    return core::ok_status();
  }

  const ArchiveSource& source_;
  const ExtractLimits limits_;
  std::vector<char> buffer_;
  std::unique_ptr<::archive, ReadArchiveFree> handle_;
  core::Sha256 hasher_;
  std::optional<Error> source_error_;
  bool at_end_ = false;
  std::uint64_t trailing_zeros_ = 0;  // zero bytes at the end of what was read so far
  UniqueFd root_;
  std::unordered_map<std::string, Node> nodes_;
  std::vector<DirectoryMetadata> directories_;
  std::string parent_path_;
  UniqueFd parent_fd_;
  std::string last_name_;
  std::uint64_t entries_ = 0;
  ExtractSummary summary_;
};

}  // namespace

core::Result<ExtractSummary> extract_archive(const ArchiveSource& source,
                                             const std::filesystem::path& empty_dest_dir,
                                             const ExtractLimits& limits) {
  const Utf8ThreadLocale utf8;
  Extractor extractor(source, limits);
  return extractor.run(empty_dest_dir);
}

core::Result<ExtractSummary> extract_archive(int fd, const std::filesystem::path& empty_dest_dir,
                                             const ExtractLimits& limits) {
  std::vector<char> buffer(kExtractChunkBytes);
  const ArchiveSource source = [&]() -> core::Result<std::string_view> {
    for (;;) {
      const ssize_t got = ::read(fd, buffer.data(), buffer.size());
      if (got >= 0) return std::string_view(buffer.data(), static_cast<std::size_t>(got));
      if (errno != EINTR) return Error::from_errno("archive", "reading the archive");
    }
  };
  return extract_archive(source, empty_dest_dir, limits);
}

}  // namespace pulsebox::archive
