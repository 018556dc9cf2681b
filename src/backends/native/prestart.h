// Sandboxes started ahead (a NativeHost with prestart, in a long-lived process
// such as `pulsebox serve --local`). One thread of its own keeps
// kSandboxesAhead sandboxes in the shape of the last run started, each up
// to init waiting for PlanReady (the next run of that shape begins at its
// workspace mounts), then tears finished runs down and empties trash/.
// Two, not one: a client that sends its next run as soon as it has the
// answer (back to back) would otherwise wait for the one being started.
// The thread lives as long as the host.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/native/sandbox_run.h"

namespace pulsebox::backends::native {

class NativeHost;

class Prestart {
 public:
  explicit Prestart(NativeHost& host);
  Prestart(const Prestart&) = delete;
  Prestart& operator=(const Prestart&) = delete;
  // Nothing more is started; the sandbox waiting and whatever is queued are
  // torn down.
  ~Prestart();

  static constexpr std::size_t kSandboxesAhead = 2;

  // A sandbox started ahead for a spec with this spec_key(), if one is still
  // waiting. Its shape is the caller's to compare before its command starts.
  std::unique_ptr<SandboxRun> take(const std::string& spec_key);
  // Queues finished runs for teardown and, with `next`, asks for a sandbox in
  // its shape.
  void retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next);
  // Until nothing is being torn down or started.
  void wait_until_idle();

 private:
  static bool still_waiting(const SandboxRun& run);
  void loop();
  // With the lock held: a wanted shape not known yet, or fewer sandboxes
  // of the wanted shape waiting than kSandboxesAhead.
  bool start_needed() const;
  void discard_other_shapes();
  // `key` is spec_key(spec).
  std::unique_ptr<SandboxRun> launch_quietly(const LaunchSpec& spec, const std::string& key);
  void tear_down_quietly(SandboxRun& run);

  NativeHost& host_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool busy_ = false;
  std::vector<std::unique_ptr<SandboxRun>> retired_;
  // The last run's spec; wanted_shape_ is empty until the thread computed it.
  std::optional<LaunchSpec> wanted_;
  std::string wanted_key_;  // spec_key(*wanted_)
  std::string wanted_shape_;
  std::uint64_t wanted_generation_ = 0;
  bool refill_ = false;                            // set by retire() with a spec, cleared once full
  std::deque<std::unique_ptr<SandboxRun>> ready_;  // all of wanted_shape_
  bool starting_ = false;
  std::string starting_key_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace pulsebox::backends::native
