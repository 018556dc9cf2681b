#include "backends/native/prestart.h"

#include <poll.h>

#include "backends/native/host.h"
#include "backends/native/launch.h"
#include "backends/native/staging.h"
#include "core/text.h"
#include "core/trace.h"

namespace pulsebox::backends::native {

Prestart::Prestart(NativeHost& host) : host_(host), thread_([this] { loop(); }) {}

Prestart::~Prestart() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

std::unique_ptr<SandboxRun> Prestart::take(const std::string& shape) {
  if (shape.empty()) return nullptr;
  std::unique_lock lock(mutex_);
  // One being started in this very shape is further along than a new
  // launch would be: wait for it.
  changed_.wait(lock, [&] { return !starting_ || starting_shape_ != shape; });
  if (!ready_ || ready_->shape != shape) return nullptr;
  std::unique_ptr<SandboxRun> run = std::move(ready_);
  if (!still_waiting(*run)) {  // its init ended (killed, or a base mount failed)
    host_.count(&NativeRuntime::Stats::discarded);
    retired_.push_back(std::move(run));
    changed_.notify_all();
    return nullptr;
  }
  return run;
}

void Prestart::retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next) {
  {
    const std::lock_guard lock(mutex_);
    for (auto& run : runs)
      retired_.push_back(std::move(run));
    if (next != nullptr) wanted_ = *next;
    busy_ = true;
  }
  changed_.notify_all();
}

void Prestart::wait_until_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !busy_ && retired_.empty() && !wanted_; });
}

// init still waits for PlanReady: nothing in the channel, no exit.
// init still waits for PlanReady: nothing in the channel, no exit.
bool Prestart::still_waiting(const SandboxRun& run) {
  pollfd fds[] = {{run.sandbox.channel.get(), POLLIN, 0}, {run.sandbox.pidfd.get(), POLLIN, 0}};
  return ::poll(fds, 2, 0) == 0;
}

void Prestart::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (retired_.empty() && !wanted_) {  // nothing left: at rest until more comes
      busy_ = false;
      changed_.notify_all();
    }
    changed_.wait(lock, [&] { return stopping_ || !retired_.empty() || wanted_; });
    if (stopping_) break;
    busy_ = true;
    if (!retired_.empty()) {
      std::vector<std::unique_ptr<SandboxRun>> runs = std::move(retired_);
      retired_.clear();
      lock.unlock();
      for (auto& run : runs)
        tear_down_quietly(*run);
      runs.clear();
      const std::atomic<bool> never{false};
      empty_trash(host_.options().state_dir / "trash", host_.options().state_dir / "pool", never);
      lock.lock();
      continue;  // more may have come meanwhile: teardowns first
    }
    LaunchSpec spec = std::move(*wanted_);
    wanted_.reset();
    spec.id = "run-" + core::random_hex(16);
    std::unique_ptr<SandboxRun> old = std::move(ready_);
    lock.unlock();
    const std::string shape = host_.shape_of(spec);
    if (old && old->shape == shape && still_waiting(*old)) {
      lock.lock();
      ready_ = std::move(old);
    } else {
      if (old) {
        host_.count(&NativeRuntime::Stats::discarded);
        tear_down_quietly(*old);
      }
      lock.lock();
      starting_ = true;
      starting_shape_ = shape;
      lock.unlock();
      std::unique_ptr<SandboxRun> run = launch_quietly(spec);
      lock.lock();
      starting_ = false;
      if (run && run->launched) {
        host_.count(&NativeRuntime::Stats::started_ahead);
        ready_ = std::move(run);
      } else if (run) {
        retired_.push_back(std::move(run));
      }
    }
    core::trace_flush();
  }
  // Stopping: nothing more is started; the sandbox waiting and whatever
  // is queued are torn down.
  std::vector<std::unique_ptr<SandboxRun>> left = std::move(retired_);
  if (ready_) {
    host_.count(&NativeRuntime::Stats::discarded);
    left.push_back(std::move(ready_));
  }
  lock.unlock();
  for (auto& run : left)
    tear_down_quietly(*run);
}

std::unique_ptr<SandboxRun> Prestart::launch_quietly(const LaunchSpec& spec) {
  auto run = host_.launch(spec);
  // Not started ahead: the next run launches itself and reports the error.
  if (!run) return nullptr;
  // The shape of what init was given, not of what the spec would give
  // now: the two may differ if the host changed meanwhile.
  if ((*run)->launched) {
    (*run)->shape = shape_text((*run)->plan, (*run)->settings, (*run)->ids.idmapped_workspace);
  }
  return std::move(run).value();
}

// What tear_down() cannot remove (a cgroup, a staging directory) keeps its
// lock file, unlocked once this process is gone: the next reconcile
// removes it.
void Prestart::tear_down_quietly(SandboxRun& run) {
  host_.tear_down(run);
}

}  // namespace pulsebox::backends::native
