#!/usr/bin/env python3
"""Host memory per concurrent sandbox, and the server's RSS (tools/bench memory).

Starts N (default 50) sandboxes of `sleep` at once with each tool, waits until
every `sleep` runs, and reads how much memory the host has in use
(MemTotal - MemAvailable) against the same moment before they started; the
difference per sandbox, less plain `sleep`'s (the command's own), is what
the sandbox costs the host. Tools: plain sleep, pulsebox run in its own
process, pulsebox run through `pulsebox serve --local` (with the server's
RSS while the N run), bwrap --unshare-all. Runs as root (cgroups and the
server as the benchmark's peers do); each round one tool at a time, the
machine's own use drifting between them, so read the per-sandbox numbers
as approximate (the median of ROUNDS).
Usage: tools/benchmarks/memory.py [--sandboxes N] [--rounds R]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402


def in_use_kib():
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, value = line.split(":", 1)
            values[name] = int(value.split()[0])
    return values["MemTotal"] - values["MemAvailable"]


def count_marker(marker):
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    count += 1
        except OSError:
            pass
    return count


def measure(argv_for, env, sandboxes, server_pid=None):
    """One sample: KiB per sandbox, and the server's RSS while they run."""
    marker = "pbmem" + uuid.uuid4().hex[:12]
    seconds = "30"
    before = in_use_kib()
    processes = [subprocess.Popen(argv_for(marker, seconds), env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for _ in range(sandboxes)]
    deadline = time.monotonic() + 60
    while count_marker(marker) < sandboxes and time.monotonic() < deadline:
        time.sleep(0.05)
    running = count_marker(marker)
    time.sleep(0.5)
    during = in_use_kib()
    server_rss = None
    if server_pid:
        with open(f"/proc/{server_pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    server_rss = int(line.split()[1])
    for p in processes:
        p.terminate()
    for p in processes:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if running < sandboxes:
        raise RuntimeError(f"only {running} of {sandboxes} started")
    time.sleep(1)
    return (during - before) / sandboxes, server_rss


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("tools/bench memory needs root (as tools/bench peers)")
    os.makedirs(peers.BENCH, exist_ok=True)
    workspace = peers.make_workspace(os.path.join(peers.BENCH, "ws-empty"), 0)
    sleep = peers.which("sleep")
    # `sh -c 'sleep N; : MARKER'`: the shell keeps the marker in its command
    # line; the shell and sleep are the command's own.
    def sh(marker, seconds):
        return ["sh", "-c", f"{sleep} {seconds}; : {marker}"]
    tools = {
        "sleep (the command's own)": (lambda m, s: sh(m, s), None),
        "pulsebox run (in-process)": (lambda m, s: [peers.PULSEBOX, "run", "--allow-weaker",
                                                    "limits", "--changes", "discard", "-w",
                                                    workspace, "--pids", "4", "--", *sh(m, s)],
                                      peers.pulsebox_env()),
        "bwrap --unshare-all": (lambda m, s: [peers.which("bwrap"), "--unshare-all",
                                              "--die-with-parent", "--ro-bind", "/", "/", "--proc",
                                              "/proc", "--dev", "/dev", *sh(m, s)], None),
    }
    results = {name: [] for name in tools}
    results["pulsebox run (served)"] = []
    server_rss = []
    server = peers.Server(workspace)
    try:
        served_env = dict(server.env, PULSEBOX_SERVER=os.path.join(
            server.env["PULSEBOX_STATE_DIR"], "server.sock"))
        for _ in range(args.rounds):
            for name, (argv_for, env) in tools.items():
                results[name].append(measure(argv_for, env, args.sandboxes)[0])
            per, rss = measure(lambda m, s: [peers.PULSEBOX, "run", "--allow-weaker", "limits",
                                             "--changes", "discard", "-w", workspace, "--pids",
                                             "4", "--", *sh(m, s)],
                               served_env, args.sandboxes, server.process.pid)
            results["pulsebox run (served)"].append(per)
            server_rss.append(rss)
    finally:
        server.stop()
    own = statistics.median(results["sleep (the command's own)"])
    print(f"== memory: {args.sandboxes} concurrent sandboxes of sleep, median of {args.rounds}")
    print(f"{'':<28} {'KiB each':>9} {'beyond the command':>19}")
    for name, values in results.items():
        each = statistics.median(values)
        print(f"{name:<28} {each:>9.0f} {each - own:>19.0f}")
    print(f"server RSS with {args.sandboxes} runs at once: {statistics.median(server_rss)} KiB")


if __name__ == "__main__":
    main()
