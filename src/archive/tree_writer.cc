// write_tree_archive: a directory tree as a deterministic pax tar stream.
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <set>
#include <unordered_set>

#include "archive/utf8_locale.h"
#include "archive/workspace_archive.h"
#include "core/sha256.h"
#include "core/text.h"
#include "core/unique_fd.h"
#include "workspace/safe_open.h"

namespace pulsebox::archive {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

constexpr std::size_t kWriteChunkBytes = 1 << 16;

// archive_write_free finishes an archive left open by an error (flush,
// end-of-archive blocks): the writer's callback refuses those bytes once
// the writer is abandoned (TreeWriter::abandoned_), so the sink is never
// called again. (archive_write_fail would skip that close, and with it the
// freeing of libarchive's block buffer.)
struct WriteArchiveFree {
  void operator()(::archive* handle) const { archive_write_free(handle); }
};
struct EntryFree {
  void operator()(::archive_entry* entry) const { archive_entry_free(entry); }
};

std::string kind_of(mode_t mode) {
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "of an unknown type";
}

// Names in one directory, in byte order (the archive's order).
core::Result<std::vector<std::string>> sorted_names(int dir_fd, const std::string& shown) {
  UniqueFd copy(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) return Error::from_errno("archive", "dup of directory " + shown);
  DIR* dir = ::fdopendir(copy.get());
  if (dir == nullptr) return Error::from_errno("archive", "listing directory " + shown);
  copy.release();
  std::unique_ptr<DIR, int (*)(DIR*)> closer(dir, ::closedir);
  ::rewinddir(dir);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
    errno = 0;
  }
  if (errno != 0) return Error::from_errno("archive", "listing directory " + shown);
  std::sort(names.begin(), names.end());
  return names;
}

class TreeWriter {
 public:
  TreeWriter(const ArchiveSink& sink, const WriteOptions& options)
      : sink_(sink), options_(options), buffer_(kWriteChunkBytes) {}
  ~TreeWriter() {
    abandoned_ = true;
    handle_.reset();
  }
  TreeWriter(const TreeWriter&) = delete;
  TreeWriter& operator=(const TreeWriter&) = delete;

  core::Result<WriteSummary> run(const std::filesystem::path& root) {
    if (options_.only_paths) PB_CHECK(select_paths(*options_.only_paths));
    for (const auto& name : options_.exclude_top_level)
      excluded_.insert(name);

    // The root is the caller's own path: it may be reached through a symlink.
    UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd) return Error::from_errno("archive", "opening the tree " + root.string());

    handle_.reset(archive_write_new());
    if (!handle_) return Error(ErrorKind::kResource, "archive", "archive_write_new failed");
    ::archive* a = handle_.get();
    // Restricted pax: a plain ustar header unless the entry needs more (a
    // long or non-ASCII name, a large size). The option hdrcharset=BINARY
    // would keep every name as bytes too, but puts a pax header (1 KB) on
    // every entry, which well-nigh doubles the stream of many small files.
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_add_filter_none(a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
        archive_write_open2(a, this, nullptr, &TreeWriter::write_callback, nullptr, nullptr) !=
            ARCHIVE_OK) {
      return archive_error("setting up the archive writer");
    }
    PB_CHECK(write_directory(root_fd.get(), "", options_.only_paths ? kSome : kAll));
    if (archive_write_close(a) != ARCHIVE_OK) return archive_error("finishing the archive");
    for (const auto& wanted : wanted_) {
      if (!found_.contains(wanted)) summary_.skipped.emplace_back(wanted, "not found");
    }
    summary_.sha256 = hasher_.hex_digest();
    return std::move(summary_);
  }

 private:
  enum Selection { kAll, kSome };

  static la_ssize_t write_callback(::archive*, void* self_pointer, const void* bytes, size_t size) {
    auto* self = static_cast<TreeWriter*>(self_pointer);
    if (self->abandoned_ || self->sink_error_) return -1;
    const std::string_view piece(static_cast<const char*>(bytes), size);
    self->hasher_.update(piece);
    auto status = self->sink_(piece);
    if (!status.ok()) {
      self->sink_error_ = std::move(status).error();
      return -1;
    }
    return static_cast<la_ssize_t>(size);
  }

  Error archive_error(const std::string& what) {
    if (sink_error_) return std::move(*sink_error_);
    const char* message = handle_ ? archive_error_string(handle_.get()) : nullptr;
    return Error(ErrorKind::kIo, "archive",
                 what + ": " + (message != nullptr ? message : "libarchive failed"));
  }

  core::Status select_paths(const std::vector<std::string>& paths) {
    for (const auto& path : paths) {
      PB_TRY(normal, workspace::check_relative_path(path));
      for (std::size_t slash = normal.find('/'); slash != std::string::npos;
           slash = normal.find('/', slash + 1)) {
        ancestors_.insert(normal.substr(0, slash));
      }
      wanted_.insert(std::move(normal));
    }
    return core::ok_status();
  }

  core::Status write_directory(int dir_fd, const std::string& prefix, Selection selection) {
    PB_TRY(names, sorted_names(dir_fd, prefix.empty() ? "(the root)" : core::quote_name(prefix)));
    for (const auto& name : names) {
      if (prefix.empty() && excluded_.contains(name)) continue;
      std::string path = prefix.empty() ? name : prefix + "/" + name;
      Selection child = kAll;
      const bool wanted = wanted_.contains(path);
      if (wanted) found_.insert(path);
      if (selection == kSome && !wanted) {
        if (ancestors_.contains(path)) {
          child = kSome;
        } else {
          continue;
        }
      }
      PB_CHECK(write_entry(dir_fd, name, path, child));
    }
    return core::ok_status();
  }

  core::Status write_entry(int dir_fd, const std::string& name, const std::string& path,
                           Selection selection) {
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return skip(path, "removed while the tree was archived");
      return Error::from_errno("archive", "stat " + core::quote_name(path));
    }
    if (S_ISDIR(st.st_mode)) {
      // A directory listed with kSome holds a wanted path but is not wanted
      // whole; its entry still goes, so the wanted path has its parents.
      UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return open_failed(path);
      PB_CHECK(fstat_same(fd.get(), st, path));
      PB_CHECK(write_header(path, AE_IFDIR, st, 0, nullptr));
      ++summary_.directories;
      return write_directory(fd.get(), path, selection);
    }
    if (selection == kSome) return core::ok_status();  // an ancestor that is not a directory
    if (S_ISREG(st.st_mode)) {
      // O_NONBLOCK: if a fifo replaced the file since fstatat, opening it
      // must not hang (fstat_same then notices the swap).
      UniqueFd fd(::openat(dir_fd, name.c_str(),
                           O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
      if (!fd) return open_failed(path);
      PB_CHECK(fstat_same(fd.get(), st, path));
      PB_CHECK(write_header(path, AE_IFREG, st, st.st_size, nullptr));
      PB_CHECK(write_content(fd.get(), path, static_cast<std::uint64_t>(st.st_size)));
      ++summary_.files;
      summary_.bytes += static_cast<std::uint64_t>(st.st_size);
      return core::ok_status();
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
      const ssize_t length = ::readlinkat(dir_fd, name.c_str(), target.data(), target.size());
      if (length < 0) return Error::from_errno("archive", "readlink " + core::quote_name(path));
      if (static_cast<std::size_t>(length) >= target.size()) {
        return Error(ErrorKind::kConcurrentModification, "archive",
                     "the symlink " + core::quote_name(path) + " changed while it was archived");
      }
      target.resize(static_cast<std::size_t>(length));
      PB_CHECK(write_header(path, AE_IFLNK, st, 0, target.c_str()));
      ++summary_.symlinks;
      return core::ok_status();
    }
    return skip(path, "it is " + kind_of(st.st_mode));
  }

  core::Status skip(const std::string& path, std::string why) {
    summary_.skipped.emplace_back(path, std::move(why));
    return core::ok_status();
  }

  core::Status open_failed(const std::string& path) {
    if (errno == EACCES || errno == EPERM) {
      return skip(path, "unreadable: " + core::describe_errno(errno));
    }
    if (errno == ENOENT) return skip(path, "removed while the tree was archived");
    return Error::from_errno("archive", "opening " + core::quote_name(path));
  }

  // The object opened is the one stat'ed (not swapped in between).
  static core::Status fstat_same(int fd, const struct stat& expected, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      return Error::from_errno("archive", "fstat " + core::quote_name(path));
    if (st.st_dev != expected.st_dev || st.st_ino != expected.st_ino ||
        (st.st_mode & S_IFMT) != (expected.st_mode & S_IFMT)) {
      return Error(ErrorKind::kConcurrentModification, "archive",
                   core::quote_name(path) + " was replaced while the tree was archived");
    }
    return core::ok_status();
  }

  core::Status write_header(const std::string& path, unsigned type, const struct stat& st,
                            off_t size, const char* symlink_target) {
    std::unique_ptr<::archive_entry, EntryFree> entry(archive_entry_new());
    if (!entry) return Error(ErrorKind::kResource, "archive", "archive_entry_new failed");
    archive_entry_copy_pathname(entry.get(), path.c_str());
    archive_entry_set_filetype(entry.get(), type);
    archive_entry_set_perm(entry.get(), st.st_mode & 0777);
    archive_entry_set_uid(entry.get(), 0);
    archive_entry_set_gid(entry.get(), 0);
    archive_entry_set_mtime(entry.get(), st.st_mtim.tv_sec, 0);
    archive_entry_set_size(entry.get(), size);
    if (symlink_target != nullptr) archive_entry_copy_symlink(entry.get(), symlink_target);
    const int status = archive_write_header(handle_.get(), entry.get());
    // A name that is not UTF-8 cannot be converted for pax's "path" record:
    // libarchive warns and writes its bytes with hdrcharset=BINARY, which
    // is what we want; any other warning is an error.
    const bool bytes_name = !core::is_valid_utf8(path) ||
                            (symlink_target != nullptr && !core::is_valid_utf8(symlink_target));
    if (status != ARCHIVE_OK && !(status == ARCHIVE_WARN && bytes_name)) {
      return archive_error("writing the entry " + core::quote_name(path));
    }
    return core::ok_status();
  }

  core::Status write_content(int fd, const std::string& path, std::uint64_t size) {
    std::uint64_t left = size;
    while (left > 0) {
      const ssize_t got = ::read(fd, buffer_.data(), std::min<std::uint64_t>(left, buffer_.size()));
      if (got < 0) {
        if (errno == EINTR) continue;
        return Error::from_errno("archive", "reading " + core::quote_name(path));
      }
      if (got == 0) break;
      if (archive_write_data(handle_.get(), buffer_.data(), static_cast<size_t>(got)) != got) {
        return archive_error("writing the content of " + core::quote_name(path));
      }
      left -= static_cast<std::uint64_t>(got);
    }
    char extra = 0;
    ssize_t more = 0;
    do {
      more = ::read(fd, &extra, 1);
    } while (more < 0 && errno == EINTR);
    if (left != 0 || more > 0) {
      return Error(ErrorKind::kConcurrentModification, "archive",
                   core::quote_name(path) + " changed size while it was archived (" +
                       std::to_string(size) + " bytes when it was listed)");
    }
    if (archive_write_finish_entry(handle_.get()) != ARCHIVE_OK) {
      return archive_error("finishing the entry " + core::quote_name(path));
    }
    return core::ok_status();
  }

  const ArchiveSink& sink_;
  const WriteOptions& options_;
  std::vector<char> buffer_;
  core::Sha256 hasher_;
  std::optional<Error> sink_error_;
  WriteSummary summary_;
  std::unordered_set<std::string> excluded_;
  std::set<std::string> wanted_;
  std::unordered_set<std::string> ancestors_;
  std::unordered_set<std::string> found_;
  bool abandoned_ = false;  // set when the writer goes: its callback takes nothing more
  // Last: freed first, while what its callback uses is still there.
  std::unique_ptr<::archive, WriteArchiveFree> handle_;
};

}  // namespace

core::Result<WriteSummary> write_tree_archive(const std::filesystem::path& root,
                                              const ArchiveSink& sink,
                                              const WriteOptions& options) {
  const Utf8ThreadLocale utf8;
  TreeWriter writer(sink, options);
  return writer.run(root);
}

}  // namespace pulsebox::archive
