// Where a remote run goes: PULSE_REMOTE_URL and PULSE_REMOTE_TOKEN, as the
// reference names them, and an HTTP client for it.
//   PULSE_REMOTE_URL   http://HOST:PORT, https://HOST:PORT or unix:/PATH
//   PULSE_REMOTE_TOKEN the server's bearer token (never a fallback when wrong)
//   PULSE_REMOTE_CA    a PEM file of the CA that signed an https server's
//                      certificate (else the system's)
#pragma once

#include <httplib.h>

#include <memory>
#include <string>

#include "core/result.h"

namespace pulsebox::http {

struct RemoteTarget {
  std::string url;    // as given, for messages
  std::string token;  // never printed
  std::string ca_file;
};

// The target from the environment; an error names the variable that is
// missing or malformed.
core::Result<RemoteTarget> remote_target_from_environment();

// A client for the target, with the token on every request and timeouts
// fit for runs (reads wait as long as a run's output may pause).
core::Result<std::unique_ptr<httplib::Client>> make_remote_client(const RemoteTarget& target);

}  // namespace pulsebox::http
