// SIGTERM and SIGINT as a call on a thread of their own (a signalfd), so
// nothing runs inside a signal handler.
#pragma once

#include <functional>

#include "core/result.h"

namespace pulsebox::http {

// Blocks SIGTERM and SIGINT in this thread and every thread it starts later
// (call it before starting any), and calls `on_signal` on a detached thread
// at each of them.
core::Status watch_shutdown_signals(std::function<void()> on_signal);

}  // namespace pulsebox::http
