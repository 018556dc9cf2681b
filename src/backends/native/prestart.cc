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

std::unique_ptr<SandboxRun> Prestart::take(const std::string& spec_key) {
  std::unique_lock lock(mutex_);
  for (;;) {
    // With none waiting, one being started for this very spec is further
    // along than a new launch would be: wait for it.
    changed_.wait(lock, [&] { return !ready_.empty() || !starting_ || starting_key_ != spec_key; });
    if (ready_.empty() || ready_.front()->spec_key != spec_key) return nullptr;
    std::unique_ptr<SandboxRun> run = std::move(ready_.front());
    ready_.pop_front();
    if (still_waiting(*run)) return run;
    // Its init ended (killed, or a base mount failed).
    host_.count(&NativeRuntime::Stats::discarded);
    retired_.push_back(std::move(run));
    changed_.notify_all();
  }
}

void Prestart::retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next) {
  {
    const std::lock_guard lock(mutex_);
    for (auto& run : runs)
      retired_.push_back(std::move(run));
    if (next != nullptr) {
      wanted_ = *next;
      wanted_key_ = spec_key(*next);
      wanted_shape_.clear();
      ++wanted_generation_;
      // Refilled once a run is over, not as soon as one is taken: the
      // run in progress keeps both cores meanwhile.
      refill_ = true;
    }
    busy_ = true;
  }
  changed_.notify_all();
}

void Prestart::wait_until_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !busy_ && retired_.empty() && !start_needed(); });
}

// With the lock held: those waiting in another shape than the wanted one
// would never be used.
void Prestart::discard_other_shapes() {
  for (auto it = ready_.begin(); it != ready_.end();) {
    if ((*it)->shape == wanted_shape_) {
      ++it;
      continue;
    }
    host_.count(&NativeRuntime::Stats::discarded);
    retired_.push_back(std::move(*it));
    it = ready_.erase(it);
  }
}

// init still waits for PlanReady: nothing in the channel, no exit.
bool Prestart::still_waiting(const SandboxRun& run) {
  pollfd fds[] = {{run.sandbox.channel.get(), POLLIN, 0}, {run.sandbox.pidfd.get(), POLLIN, 0}};
  return ::poll(fds, 2, 0) == 0;
}

bool Prestart::start_needed() const {
  return wanted_ && refill_ && (wanted_shape_.empty() || ready_.size() < kSandboxesAhead);
}

void Prestart::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (retired_.empty() && !start_needed()) {  // nothing left: at rest until more comes
      busy_ = false;
      changed_.notify_all();
    }
    changed_.wait(lock, [&] { return stopping_ || !retired_.empty() || start_needed(); });
    if (stopping_) break;
    busy_ = true;
    // A start first when none is waiting (a run may be waiting for one);
    // with one waiting, the finished runs are torn down before the second
    // is started, so their teardown never falls behind under load.
    if (start_needed() && (ready_.empty() || retired_.empty())) {
      LaunchSpec spec = *wanted_;
      spec.id = "run-" + core::random_hex(16);
      const std::uint64_t generation = wanted_generation_;
      const std::string key = wanted_key_;
      std::string shape = wanted_shape_;
      // A fresh look at the host is asked for (a run of this spec ended):
      // with room for one more, the launch itself is that look (below).
      const bool fresh_look = shape.empty();
      if (fresh_look && ready_.size() >= kSandboxesAhead) {
        lock.unlock();
        shape = host_.shape_of(spec);
        lock.lock();
        // Another spec came meanwhile: its shape is computed next. The same
        // one asked for again (a run of it ended) takes this fresh look.
        if (generation != wanted_generation_ && wanted_key_ != key) continue;
        wanted_shape_ = shape;
        discard_other_shapes();
        if (shape.empty() || ready_.size() >= kSandboxesAhead) refill_ = false;
        continue;
      }
      starting_ = true;
      starting_key_ = key;
      lock.unlock();
      std::unique_ptr<SandboxRun> run = launch_quietly(spec, key);
      lock.lock();
      starting_ = false;
      // The launch planned from the host as it is now: its shape is the
      // fresh look, unless another spec is wanted by now.
      if (fresh_look && run && run->launched && !run->shape.empty() && wanted_key_ == key &&
          wanted_shape_.empty()) {
        shape = run->shape;
        wanted_shape_ = shape;
        discard_other_shapes();
      }
      // Kept if init has the shape it was started for and that spec is still
      // the one wanted: runs of it that ended meanwhile only ask for a fresh
      // look at the host, which the next turn compares the waiting ones with.
      if (run && run->launched && !shape.empty() && run->shape == shape && wanted_key_ == key) {
        host_.count(&NativeRuntime::Stats::started_ahead);
        ready_.push_back(std::move(run));
        if (ready_.size() >= kSandboxesAhead && !wanted_shape_.empty()) refill_ = false;
      } else {
        if (run && run->launched) host_.count(&NativeRuntime::Stats::discarded);
        if (run) retired_.push_back(std::move(run));
        // Not launched (the next run launches itself and reports why), or
        // the host changed while it was: no second try until the next run.
        // Another spec asked for meanwhile is started next.
        if (wanted_key_ == key) refill_ = false;
      }
      changed_.notify_all();
      core::trace_flush();
      continue;
    }
    std::vector<std::unique_ptr<SandboxRun>> runs = std::move(retired_);
    retired_.clear();
    lock.unlock();
    for (auto& run : runs)
      tear_down_quietly(*run);
    runs.clear();
    const std::atomic<bool> never{false};
    empty_trash(host_.options().state_dir / "trash", host_.options().state_dir / "pool", never);
    core::trace_flush();
    lock.lock();
  }
  // Stopping: nothing more is started; the sandboxes waiting and whatever
  // is queued are torn down.
  std::vector<std::unique_ptr<SandboxRun>> left = std::move(retired_);
  for (auto& run : ready_) {
    host_.count(&NativeRuntime::Stats::discarded);
    left.push_back(std::move(run));
  }
  ready_.clear();
  lock.unlock();
  for (auto& run : left)
    tear_down_quietly(*run);
}

std::unique_ptr<SandboxRun> Prestart::launch_quietly(const LaunchSpec& spec,
                                                     const std::string& key) {
  auto run = host_.launch(spec);
  // Not started ahead: the next run launches itself and reports the error.
  if (!run) return nullptr;
  // The shape of what init was given, not of what the spec would give
  // now: the two may differ if the host changed meanwhile.
  if ((*run)->launched) {
    (*run)->shape = shape_text((*run)->plan, (*run)->settings, (*run)->ids.idmapped_workspace);
    (*run)->spec_key = key;
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
