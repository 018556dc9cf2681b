// At most max_runs runs at once; up to max_queue more wait, first come first
// served; beyond that a request is turned away.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace pulsebox::http {

class RunSlots {
 public:
  RunSlots(unsigned max_runs, unsigned max_queue) : max_runs_(max_runs), max_queue_(max_queue) {}

  enum class Admission { kRun, kBusy, kShuttingDown, kClientGone };

  // Waits for a slot in arrival order. `client_gone` is asked now and then
  // while waiting; a waiter whose client left gives its place up. After
  // kRun the caller owns a slot and must release() it.
  Admission acquire(const std::function<bool()>& client_gone);
  void release();

  // From now on nobody is admitted; waiters leave with kShuttingDown.
  void close();
  // Whether every slot was released before `deadline`.
  bool wait_idle_until(std::chrono::steady_clock::time_point deadline);

  struct Counts {
    unsigned active = 0;
    unsigned queued = 0;
    unsigned max = 0;
  };
  Counts counts() const;

 private:
  const unsigned max_runs_;
  const unsigned max_queue_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  unsigned active_ = 0;
  std::deque<std::uint64_t> queue_;
  std::uint64_t next_ticket_ = 0;
  bool closed_ = false;
};

}  // namespace pulsebox::http
