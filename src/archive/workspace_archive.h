// Workspaces as tar streams: a remote caller's workspace travels to the
// server, and the server's results travel back, as uncompressed pax tar
// read and written with libarchive. Everything that arrives is hostile.
//
// Sending a tree:
//   archive::WriteOptions options{.exclude_top_level = {".agent"}};
//   auto summary = archive::write_tree_archive(root, [&](std::string_view bytes) {
//     return send(bytes);  // a core::Status; an error stops the archive
//   }, options);
//   // summary->sha256 names the stream; summary->skipped lists what could
//   // not go (sockets, fifos, devices, unreadable files), each with why.
//
// Receiving one (into a directory that exists and is empty):
//   auto summary = archive::extract_archive(socket_fd, dest);
//   if (!summary.ok()) remove_tree(dest);  // it may hold a partial tree
//
// The archive is deterministic: the same tree gives the same bytes (and so
// the same sha256). Entries come depth first, each directory's entries in
// byte order of their names, a directory before what it holds; uid and gid
// are 0 with no user or group names; mtime is kept in whole seconds; only
// the permission bits (mode & 0777) are written, never setuid, setgid or
// sticky. Regular files, directories and symlinks (target as it is) go;
// hard links go as separate files. The tree is read without following any
// symlink (every open is O_NOFOLLOW relative to its directory's fd) and
// files are streamed in chunks, never held whole in memory. A file that
// changes size while it is read is an error, never a silently cut copy.
//
// Extraction checks each entry before it writes anything for it, and fails
// with an error whose message names the entry (quoted as core::quote_name
// does) and says what is wrong:
//   kSecurity:     absolute paths, ".." components, names that are empty or
//                  only ".", symlinks whose target is absolute, climbs out
//                  of the tree, or holds ".." after a name (see below),
//                  entries beneath a symlink extracted earlier, hard links,
//                  devices, fifos, sockets, unknown types;
//   kInvalidInput: duplicate entries, names over max_path_bytes or deeper
//                  than max_depth, input that is not a tar archive (only
//                  ustar, pax and GNU tar, uncompressed, are read), a
//                  truncated or damaged archive (also one cut between two
//                  entries: it must end with tar's end-of-archive blocks),
//                  a destination that is not an empty directory;
//   kResource:     more than max_entries entries or max_total_bytes bytes
//                  of file content (counted before anything past them is
//                  written).
// setuid, setgid and sticky bits are stripped, not refused (a checkout may
// well hold a sticky directory; nothing depends on the bit). Owners, xattrs
// and ACLs in the archive are ignored: files belong to the extracting user.
// A symlink's target must be "../" repeated at most as deep as the link
// sits, then names: ".." after a name ("a/../b") is refused, because
// lexical normalisation is wrong when "a" is itself a symlink. Parent
// directories an archive leaves out are created (and counted as entries).
// Files are created O_EXCL|O_NOFOLLOW and directories walked with
// O_NOFOLLOW|O_DIRECTORY from the destination's fd, so nothing is followed.
// On error the destination may hold a partial tree: the caller removes it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace pulsebox::archive {

// Receives the archive in pieces, in order; an error stops the writer,
// which returns that error.
using ArchiveSink = std::function<core::Status(std::string_view bytes)>;

struct WriteOptions {
  // Relative paths: just these (a directory with all it holds) and their
  // parent directories; a path that is not there (or lies beneath a
  // symlink) is listed in WriteSummary::skipped. nullopt: the whole tree.
  std::optional<std::vector<std::string>> only_paths;
  // Names directly under the root left out (".agent").
  std::vector<std::string> exclude_top_level;
};

struct WriteSummary {
  std::uint64_t files = 0;
  std::uint64_t directories = 0;
  std::uint64_t symlinks = 0;
  std::uint64_t bytes = 0;  // of file content
  std::string sha256;       // hex, of the archive stream
  // (relative path, why) of what was not archived: sockets, fifos,
  // devices, unreadable files and directories, only_paths not found.
  std::vector<std::pair<std::string, std::string>> skipped;
};

core::Result<WriteSummary> write_tree_archive(const std::filesystem::path& root,
                                              const ArchiveSink& sink,
                                              const WriteOptions& options = {});

// The next piece of the archive; empty at the end. The bytes must stay
// valid until the next call.
using ArchiveSource = std::function<core::Result<std::string_view>()>;

struct ExtractLimits {
  std::uint64_t max_total_bytes = 1ULL << 30;  // of file content
  std::uint64_t max_entries = 200000;          // parent directories created count too
  std::uint64_t max_path_bytes = 4096;         // of a name, and of a symlink's target
  std::uint32_t max_depth = 256;               // components of a name
};

struct ExtractSummary {
  std::uint64_t files = 0;
  std::uint64_t directories = 0;  // created for an entry or as its parent
  std::uint64_t symlinks = 0;
  std::uint64_t bytes = 0;  // of file content
  std::string sha256;       // hex, of every byte read from the source
};

core::Result<ExtractSummary> extract_archive(const ArchiveSource& source,
                                             const std::filesystem::path& empty_dest_dir,
                                             const ExtractLimits& limits = {});

// The same, reading the archive from `fd` until its end of file.
core::Result<ExtractSummary> extract_archive(int fd, const std::filesystem::path& empty_dest_dir,
                                             const ExtractLimits& limits = {});

}  // namespace pulsebox::archive
