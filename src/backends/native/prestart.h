// Sandboxes started ahead (a NativeHost with prestart, in a long-lived process
// such as `pulsebox serve --local`). One thread of its own tears finished
// runs down, empties trash/, and then starts one sandbox in the shape of the
// last run, up to init waiting for PlanReady: the next run of that shape
// begins at its workspace mounts. The thread lives as long as the host.
#pragma once

#include <condition_variable>
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

  // The sandbox started ahead in this shape, if it is still waiting.
  std::unique_ptr<SandboxRun> take(const std::string& shape);
  // Queues finished runs for teardown and, with `next`, asks for a sandbox in
  // its shape.
  void retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next);
  // Until nothing is being torn down or started.
  void wait_until_idle();

 private:
  static bool still_waiting(const SandboxRun& run);
  void loop();
  std::unique_ptr<SandboxRun> launch_quietly(const LaunchSpec& spec);
  void tear_down_quietly(SandboxRun& run);

  NativeHost& host_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool busy_ = false;
  std::vector<std::unique_ptr<SandboxRun>> retired_;
  std::optional<LaunchSpec> wanted_;
  std::unique_ptr<SandboxRun> ready_;
  bool starting_ = false;
  std::string starting_shape_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace pulsebox::backends::native
