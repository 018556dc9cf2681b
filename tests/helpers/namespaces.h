// Runs a function in a child process inside fresh namespaces, for tests that
// mount things. The host's mounts are never touched: the child gets its own
// mount namespace with "/" made private first.
#pragma once

#include <functional>
#include <string>

namespace pulsebox::testing {

enum class NamespaceKind {
  kUserAndMount,  // a user namespace (invoking uid/gid mapped to 0) + mount namespace
  kMountOnly,     // only a mount namespace (needs root)
  // A user namespace (as kUserAndMount) in which no further user namespace
  // can be created (user.max_user_namespaces = 0 there): a host without them.
  kNoNestedUserNamespaces,
};

struct ChildOutcome {
  bool setup_failed = false;  // the namespaces could not be created
  std::string setup_error;
  int exit_code = -1;  // fn's return value
};

ChildOutcome run_in_namespaces(NamespaceKind kind, const std::function<int()>& fn);

// Writes `text` to a /proc file in one write (uid_map, setgroups, ...).
bool write_proc(const char* path, const std::string& text);

// mount -t overlay with index=off,xino=off (and userxattr in a user namespace).
// Returns 0 or the errno.
int mount_overlay(const std::string& lower, const std::string& upper, const std::string& work,
                  const std::string& merged, bool userxattr);

}  // namespace pulsebox::testing
