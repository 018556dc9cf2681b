// A test binary's own network (and mount) namespace, entered before any test
// runs, so that network tests play "the host and the internet" themselves:
// nothing they start or send can reach the machine's own interfaces.
//
// Link this file's registration (private_network_env.cc) into a test binary
// and every test in it runs in a fresh network namespace with only `lo`, up.
// As root the namespaces are plain ones; as an ordinary user they belong to
// a new user namespace in which the invoking uid and gid are mapped to
// themselves (so programs the tests start are still that ordinary user, with
// no capabilities after their execve).
#pragma once

#include <string>

namespace pulsebox::testing {

// Enters the namespaces. Returns "" or what failed. Must be called while the
// process has one thread (a user namespace requires it).
std::string enter_private_network();

// Whether enter_private_network() succeeded in this process.
bool in_private_network();

// Runs `ip` with these arguments in the test's namespace ("addr add
// 169.254.7.1/32 dev lo"); returns its exit status (prints its stderr).
int ip_command(const std::string& arguments);

// Replaces /etc/hosts, in the test's own mount namespace only, with a file
// holding `content`, so that names the tests choose resolve to addresses the
// tests choose. Returns "" or what failed.
std::string override_hosts_file(const std::string& content);

}  // namespace pulsebox::testing
