#!/usr/bin/env python3
"""Throughput under sustained load: 4 clients for windows in a row.

`tools/bench peers` measures throughput for a few seconds per kind; a host
that runs commands all day sees what those seconds leave behind. Here each
kind (served runs, served runs with `--disk`, bwrap) has windows of 4
clients back to back, so a cost that grows with the runs before it shows as
runs/s falling from window to window; right after its last window, 20 runs
with 30 ms gaps give the latency its load left behind. Kinds in turn, not
interleaved: what one kind's runs leave behind is what is measured.

Why `--disk` beside the default: on ext4 without a journal, allocating an
inode skips every free inode of its group deleted in the last 60 s (360 s
while its inode table block is dirty) and scans them one by one; an overlay
mount allocates ~7 inodes in its work directory and frees them, so with a
staging directory there the mount grows slower the more runs came before.
`--disk` puts the run's changes on a tmpfs of its own. The state
directory's file system and journal are printed first.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

CLIENTS = 4


def file_system_of(path):
    """(type, source, journal) of the mount holding `path`; journal is
    "yes", "no" or "unknown" (ext4 only: /sys/fs/ext4/DEV/journal_task)."""
    path = os.path.realpath(path)
    best = ("", "?", "?")
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4]
            rest = fields[fields.index("-") + 1:]
            inside = path == point or path.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best[0]):
                best = (point, rest[0], rest[1])
    _, fstype, source = best
    journal = "unknown"
    if fstype == "ext4":
        try:
            with open(f"/sys/fs/ext4/{os.path.basename(source)}/journal_task") as f:
                journal = "no" if f.read().strip() == "<none>" else "yes"
        except OSError:
            pass
    return fstype, source, journal


def timed_run(kind, argv, env):
    """One run's milliseconds; a failed run ends the benchmark, naming it."""
    elapsed, status, _ = peers.run_once(argv, env)
    if status != 0:
        sys.exit(f"sustained: {kind} exited with {status}: {' '.join(argv)}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=6, help="windows (default 6)")
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="seconds per kind in each window (default 4)")
    args = parser.parse_args()
    if not 1 <= args.windows <= 50 or not 0.5 <= args.seconds <= 60:
        parser.error("--windows takes 1 to 50 and --seconds 0.5 to 60")
    bwrap = peers.which("bwrap")
    if not bwrap:
        sys.exit("sustained: bubblewrap is not installed (tools/setup installs it)")
    os.makedirs(peers.BENCH, exist_ok=True)
    workspace = peers.make_workspace(os.path.join(peers.BENCH, "ws-empty"), 0)
    env = peers.pulsebox_env(server=True)
    fstype, source, journal = file_system_of(os.path.dirname(env["PULSEBOX_STATE_DIR"]))
    print(f"== sustained load: {CLIENTS} clients, {args.windows} window(s) of {args.seconds:g} s "
          f"per kind; state directory on {fstype} ({source}), journal: {journal}")
    base = [peers.PULSEBOX, "run", "-w", workspace, "--net", "none"]
    kinds = {
        "served": base + ["--", "/bin/true"],
        "served --disk": base + ["--disk", "256M", "--", "/bin/true"],
        "bwrap": peers.bwrap_true(bwrap),
    }
    server = peers.Server(workspace)
    try:
        # A kind that cannot run here says so now, not as 0 runs/s.
        for kind, argv in kinds.items():
            timed_run(kind, argv, env)
        rates, latency = {}, {}
        print(f"{'':<14}" + "".join(f"{w + 1:>7}" for w in range(args.windows)) +
              "   (runs/s per window)   then latency")
        for kind, argv in kinds.items():
            rates[kind] = []
            print(f"{kind:<14}", end="", flush=True)
            for _ in range(args.windows):
                rate, _ = peers.throughput(argv, env, CLIENTS, args.seconds)
                if rate == 0:
                    sys.exit(f"\nsustained: no run of {kind} succeeded in a window")
                rates[kind].append(rate)
                print(f"{rate:>7.1f}", end="", flush=True)
            samples = []
            for _ in range(20):
                samples.append(timed_run(kind, argv, env))
                time.sleep(0.03)
            latency[kind] = statistics.median(samples)
            print(f"   {latency[kind]:.2f} ms")
        print("last window / first: " +
              ", ".join(f"{k} {rates[k][-1] / rates[k][0]:.2f}" for k in kinds))
        print(f"served / bwrap, last window: {rates['served'][-1] / rates['bwrap'][-1]:.2f}; "
              f"with --disk {rates['served --disk'][-1] / rates['bwrap'][-1]:.2f}")
        print(f"latency after each kind's load, served / bwrap: "
              f"{latency['served'] / latency['bwrap']:.2f}; with --disk "
              f"{latency['served --disk'] / latency['bwrap']:.2f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
