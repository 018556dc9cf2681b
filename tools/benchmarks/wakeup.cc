// What one hand-over between two processes costs on this machine (tools/bench
// wakeup): a parent sends a byte on a unix socket to a child blocked in
// read(), as the supervisor wakes init with PlanReady, then goes on working
// for SPIN µs, as the supervisor goes on with the run. Reported: the median
// and p90 of the time until the child runs, and how often it ran on the
// parent's CPU; after an idle gap (as an agent's commands arrive) and back
// to back, with the two free and with each pinned to a CPU of its own.
//
//   wakeup [ROUNDS] [SPIN_US]      (defaults: 200 rounds, 300 µs)
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double now_us() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

// Written by the child, read by the parent: shared, not copied, by fork.
struct Shared {
  double sent_at;
  double woke_after[1000];
  int child_cpu[1000];
};

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)::sched_setaffinity(0, sizeof set, &set);
}

void measure(int rounds, int spin_us, int gap_ms, bool pinned) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair) != 0) {
    std::perror("socketpair");
    std::exit(1);
  }
  auto* shared = static_cast<Shared*>(
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  const pid_t child = ::fork();
  if (child == 0) {
    if (pinned) pin_to(1);
    char byte = 0;
    for (int i = 0; i < rounds; ++i) {
      if (::read(pair[1], &byte, 1) != 1) ::_exit(1);
      shared->woke_after[i] = now_us() - shared->sent_at;
      shared->child_cpu[i] = ::sched_getcpu();
      if (::write(pair[1], &byte, 1) != 1) ::_exit(1);
    }
    ::_exit(0);
  }
  cpu_set_t allowed;  // given back after the pinned rounds
  (void)::sched_getaffinity(0, sizeof allowed, &allowed);
  if (pinned) pin_to(0);
  std::vector<double> latencies;
  int same_cpu = 0;
  for (int i = 0; i < rounds; ++i) {
    if (gap_ms > 0) ::usleep(static_cast<useconds_t>(gap_ms) * 1000);
    char byte = 1;
    const int parent_cpu = ::sched_getcpu();
    shared->sent_at = now_us();
    if (::write(pair[0], &byte, 1) != 1) break;
    for (const double start = now_us(); now_us() - start < spin_us;) {
    }
    if (::read(pair[0], &byte, 1) != 1) break;
    latencies.push_back(shared->woke_after[i]);
    same_cpu += shared->child_cpu[i] == parent_cpu ? 1 : 0;
  }
  ::waitpid(child, nullptr, 0);
  if (pinned) (void)::sched_setaffinity(0, sizeof allowed, &allowed);
  ::munmap(shared, sizeof(Shared));
  ::close(pair[0]);
  ::close(pair[1]);
  std::sort(latencies.begin(), latencies.end());
  const auto at = [&](double fraction) {
    return latencies.empty()
               ? 0.0
               : latencies[static_cast<std::size_t>(fraction * (latencies.size() - 1))];
  };
  std::printf(
      "  %-13s %-22s woken after median %7.1f us, p90 %7.1f us; on the sender's CPU %3d/%zu\n",
      gap_ms > 0 ? "after 30 ms" : "back to back",
      pinned ? "pinned to two CPUs" : "placed by the kernel", at(0.5), at(0.9), same_cpu,
      latencies.size());
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = std::clamp(argc > 1 ? std::atoi(argv[1]) : 200, 1, 1000);
  const int spin_us = argc > 2 ? std::atoi(argv[2]) : 300;
  const bool two_cpus = ::sysconf(_SC_NPROCESSORS_ONLN) >= 2;
  std::printf("== a unix-socket hand-over, the sender working on for %d us (%d rounds each)\n",
              spin_us, rounds);
  for (const int gap_ms : {30, 0}) {
    measure(rounds, spin_us, gap_ms, false);
    if (two_cpus) measure(rounds, spin_us, gap_ms, true);
  }
  return 0;
}
