#!/usr/bin/env python3
"""Commits at copy speed: reading a run's changes and committing them
against `cp -a` + `sync` of the same tree (issue #24, item 4).

For N = 1,000, 10,000 and 100,000 small files (2-3 KiB each, 100 per
directory), in one process and interleaved so the machine's drift hits
every side:
  - one real `pulsebox run` creates the tree in the workspace; its import
    is the time between the trace phases "result audited" and "changes
    imported" (PULSEBOX_TRACE=1), its peak RSS the run's ru_maxrss;
  - `pulsebox commit` of that transaction: wall time and ru_maxrss;
  - `cp -a` of the same tree to a fresh directory on the same file system,
    then `sync`: wall time and cp's ru_maxrss.
The ratio (import + commit) / (cp -a + sync) is the target (<= 1.0).
Usage: tools/benchmarks/commit_speed.py [--sizes 1000,10000,100000] [--rounds N] [--bin PULSEBOX]
       [--old OLD_PULSEBOX]   (both builds in the same rounds, each beside its own cp -a)
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "src", "cli", "pulsebox")

# Runs inside the sandbox: N files of 2-3 KiB in directories of 100.
MAKE = r"""
import os, sys
n = int(sys.argv[1])
block = bytes(range(256)) * 12
for i in range(n):
    d = "tree/d%04d" % (i // 100)
    if i % 100 == 0:
        os.makedirs(d, exist_ok=True)
    with open("%s/f%05d" % (d, i), "wb") as f:
        f.write(b"%d\n" % i + block[: 2048 + (i * 37) % 1024])
"""


def env(state, trace=False):
    e = dict(os.environ)
    e.update({"PULSEBOX_STATE_DIR": state, "PULSEBOX_SERVER": "off", "NO_COLOR": "1"})
    if trace:
        e["PULSEBOX_TRACE"] = "1"
    return e


def rss_of(argv, **kwargs):
    """Runs argv; returns (ms, its peak RSS in MB, stdout, stderr).
    The peak is GNU time's %M: Python's own wait4 ru_maxrss would not do,
    because a process that execs keeps the larger of its old and new
    image's peaks, and a child forked (or vforked) from this script starts
    with the script's size."""
    with tempfile.NamedTemporaryFile("r") as peak:
        started = time.perf_counter()
        child = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", peak.name] + argv,
                               capture_output=True, **kwargs)
        elapsed = (time.perf_counter() - started) * 1000
        if child.returncode != 0:
            sys.exit(f"{' '.join(argv[:4])}...: exit {child.returncode}: "
                     f"{child.stderr.decode()[-2000:]}")
        rss_mb = int(peak.read().split()[-1]) / 1024
    return elapsed, rss_mb, child.stdout.decode(errors="replace"), child.stderr.decode(errors="replace")


def phase(trace, name):
    for line in trace.splitlines():
        m = re.match(r"pulsebox trace: +([0-9.]+) ms .* " + re.escape(name) + "$", line)
        if m:
            return float(m.group(1))
    sys.exit(f"no trace phase {name!r} in:\n{trace[-3000:]}")


def one_round(files, base, binary):
    ws, state = os.path.join(base, "ws"), os.path.join(base, "state")
    # What the rounds before left to write back (their trees' removal) is
    # flushed first: else the commit's syncfs or cp's sync pays for it.
    subprocess.run(["sync"], check=True)
    os.makedirs(ws)
    os.chmod(base, 0o711)  # the sandbox's init must reach the state directory
    _, run_rss, out, err = rss_of([binary, "run", "--allow-weaker", "limits", "--timeout", "600",
                                   "-w", ws, "--", "python3", "-c", MAKE, str(files)],
                                  env=env(state, trace=True))
    imported = phase(err, "sandbox: changes imported") - phase(err, "sandbox: result audited")
    ids = [line.split()[0] for line in subprocess.run(
        [binary, "changes", "-w", ws], env=env(state), capture_output=True, text=True,
        check=True).stdout.splitlines() if line.startswith("tx-")]
    if len(ids) != 1:
        sys.exit(f"expected one transaction, got {ids}")
    commit_ms, commit_rss, _, _ = rss_of([binary, "commit", "-w", ws, ids[0]], env=env(state))
    count = sum(len(names) for _, _, names in os.walk(os.path.join(ws, "tree")))
    if count != files:
        sys.exit(f"committed {count} files, expected {files}")
    # The same tree copied on the same file system, then made durable.
    subprocess.run(["sync"], check=True)
    copy = os.path.join(base, "copy")
    started = time.perf_counter()
    _, cp_rss, _, _ = rss_of(["cp", "-a", os.path.join(ws, "tree"), copy])
    copied = time.perf_counter()
    subprocess.run(["sync"], check=True)
    cp_ms = (time.perf_counter() - started) * 1000
    sync_ms = (time.perf_counter() - copied) * 1000
    return imported, run_rss, commit_ms, commit_rss, cp_ms, cp_rss, sync_ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dir", default=None, help="where to make the workspaces")
    parser.add_argument("--bin", default=None, help="another pulsebox binary (to compare builds)")
    parser.add_argument("--old", default=None,
                        help="an older pulsebox binary, measured in the same rounds (before the new)")
    args = parser.parse_args()
    if args.bin:
        global BIN
        BIN = os.path.abspath(args.bin)
    builds = [("old", os.path.abspath(args.old))] if args.old else []
    builds.append(("new" if args.old else "", BIN))
    print("== commits at copy speed: import + commit vs cp -a + sync (ms; peak RSS MB)")
    print(f"{'files':>7} {'build':>5} {'import':>9} {'commit':>9} {'cp+sync':>9} {'ratio':>6} "
          f"{'(sync':>6}) "
          f"{'run RSS':>8} {'commit RSS':>11} {'cp RSS':>7}")
    for files in (int(s) for s in args.sizes.split(",")):
        rows = {name: [] for name, _ in builds}
        for round_number in range(args.rounds):
            # Each build's round is followed by its own cp -a, so the drift
            # of the machine (other work writing to the disk) hits both; the
            # order alternates, so neither always goes first.
            for name, binary in (builds if round_number % 2 == 0 else builds[::-1]):
                base = tempfile.mkdtemp(prefix="pb-commit-", dir=args.dir)
                try:
                    rows[name].append(one_round(files, base, binary))
                finally:
                    shutil.rmtree(base, ignore_errors=True)
        for name, _ in builds:
            imp, rrss, com, crss, cp, cprss, sync = (statistics.median(c)
                                                     for c in zip(*rows[name]))
            print(f"{files:>7} {name:>5} {imp:>9.0f} {com:>9.0f} {cp:>9.0f} {(imp + com) / cp:>6.2f} "
                  f"{sync:>6.0f}) "
                  f"{rrss:>8.0f} {crss:>11.0f} {cprss:>7.0f}", flush=True)


if __name__ == "__main__":
    main()
