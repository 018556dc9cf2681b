#include "http/run_slots.h"

#include <algorithm>

namespace pulsebox::http {

RunSlots::Admission RunSlots::acquire(const std::function<bool()>& client_gone) {
  std::unique_lock lock(mutex_);
  if (closed_) return Admission::kShuttingDown;
  if (active_ < max_runs_ && queue_.empty()) {
    ++active_;
    return Admission::kRun;
  }
  if (queue_.size() >= max_queue_) return Admission::kBusy;
  const std::uint64_t ticket = next_ticket_++;
  queue_.push_back(ticket);
  const auto leave = [&](Admission why) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    changed_.notify_all();
    return why;
  };
  while (true) {
    if (closed_) return leave(Admission::kShuttingDown);
    if (active_ < max_runs_ && queue_.front() == ticket) {
      ++active_;
      return leave(Admission::kRun);
    }
    // The client's hang-up is not an event this wait can see: look now and then.
    changed_.wait_for(lock, std::chrono::milliseconds(200));
    if (client_gone) {
      lock.unlock();
      const bool gone = client_gone();
      lock.lock();
      if (gone) return leave(Admission::kClientGone);
    }
  }
}

void RunSlots::release() {
  std::lock_guard lock(mutex_);
  --active_;
  changed_.notify_all();
}

void RunSlots::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

bool RunSlots::wait_idle_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  return changed_.wait_until(lock, deadline, [&] { return active_ == 0; });
}

RunSlots::Counts RunSlots::counts() const {
  std::lock_guard lock(mutex_);
  return {.active = active_, .queued = static_cast<unsigned>(queue_.size()), .max = max_runs_};
}

}  // namespace pulsebox::http
