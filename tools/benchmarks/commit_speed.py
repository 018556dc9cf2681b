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
With --busy, small commits (1, 4 and 32 files) while another process keeps
writing to the same file system (as a build beside the sandbox does; 32
files in their two new directories are past the commit's fsync-each limit,
so every build takes one syncfs there): the commit's wall time against `cp -a` + `sync -f` (syncfs of the file system)
and `cp -a` + `sync FILE...` (an fsync per file) of the same files.
Usage: tools/benchmarks/commit_speed.py [--sizes 1000,10000,100000] [--rounds N] [--bin PULSEBOX]
       [--old OLD_PULSEBOX]   (both builds in the same rounds, each beside its own cp -a)
       tools/benchmarks/commit_speed.py --busy [--sizes 1,4,32] [--rounds 5]
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


def the_one_transaction(binary, ws, state):
    """The id of the one transaction pending in `ws`."""
    ids = [line.split()[0] for line in subprocess.run(
        [binary, "changes", "-w", ws], env=env(state), capture_output=True, text=True,
        check=True).stdout.splitlines() if line.startswith("tx-")]
    if len(ids) != 1:
        sys.exit(f"expected one transaction, got {ids}")
    return ids[0]


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
    tx = the_one_transaction(binary, ws, state)
    commit_ms, commit_rss, _, _ = rss_of([binary, "commit", "-w", ws, tx], env=env(state))
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


# Runs beside the busy rounds: writes a file of 256 MiB in 1 MiB blocks,
# removes it and starts again, without syncing, for at most `seconds`.
WRITER = r"""
import os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
block = b"w" * (1 << 20)
end = time.monotonic() + seconds
while time.monotonic() < end:
    with open(path, "wb") as f:
        for _ in range(256):
            f.write(block)
            if time.monotonic() >= end:
                break
    os.unlink(path)
"""


def small_commit(files, base, binary):
    """A run making `files` files in base/ws, then its commit: the commit's ms."""
    ws, state = os.path.join(base, "ws"), os.path.join(base, "state")
    os.makedirs(ws)
    os.chmod(base, 0o711)
    rss_of([binary, "run", "--allow-weaker", "limits", "-w", ws, "--", "python3", "-c", MAKE,
            str(files)], env=env(state))
    tx = the_one_transaction(binary, ws, state)
    commit_ms, _, _, _ = rss_of([binary, "commit", "-w", ws, tx], env=env(state))
    return commit_ms


def busy_round(files, base, builds):
    """Each build's small commit, then the two peers of its files, while the
    writer runs: [commit ms per build], cp+syncfs ms, cp+fsyncs ms."""
    commits = []
    for name, binary in builds:
        commits.append(small_commit(files, os.path.join(base, name or "new"), binary))
    ws = os.path.join(base, builds[-1][0] or "new", "ws")
    tree = os.path.join(ws, "tree")
    names = [os.path.join(d, n) for d, _, ns in os.walk(tree) for n in ns]
    if len(names) != files:
        sys.exit(f"committed {len(names)} files, expected {files}")
    peers = []
    for how in (["sync", "-f"], ["sync"]):
        copy = os.path.join(base, "copy-" + how[-1].strip("-"))
        started = time.perf_counter()
        subprocess.run(["cp", "-a", tree, copy], check=True)
        copied = [os.path.join(copy, os.path.relpath(n, tree)) for n in names]
        # sync -f: one syncfs of the file system; sync FILE...: an fsync each
        # (and of the directories, as a commit does).
        targets = [copy] if how == ["sync", "-f"] else copied + sorted(
            {os.path.dirname(c) for c in copied}) + [base]
        subprocess.run(how + targets, check=True)
        peers.append((time.perf_counter() - started) * 1000)
    return commits, peers[0], peers[1]


def busy(args, builds):
    sizes = [int(s) for s in (args.sizes or "1,4,32").split(",")]
    rounds = max(args.rounds, 5)
    base_dir = tempfile.mkdtemp(prefix="pb-busy-", dir=args.dir)
    os.chmod(base_dir, 0o711)
    print("== small commits while another process writes to the same file system (ms, medians of "
          f"{rounds})")
    print(f"{'files':>6} {'build':>5} {'commit':>8} {'cp+syncfs':>10} {'cp+fsyncs':>10} "
          f"{'ratio syncfs':>13} {'ratio fsyncs':>13}")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, os.path.join(base_dir, "writer.bin"),
                               str(60 * len(sizes))])
    try:
        time.sleep(2)  # dirty data builds up first
        for files in sizes:
            rows = []
            for _ in range(rounds):
                base = tempfile.mkdtemp(prefix="round-", dir=base_dir)
                os.chmod(base, 0o711)  # the sandbox's init must reach the state directories
                try:
                    rows.append(busy_round(files, base, builds))
                finally:
                    shutil.rmtree(base, ignore_errors=True)
                if writer.poll() is not None:
                    sys.exit("the writer stopped before the rounds did (raise its time)")
            syncfs = statistics.median(row[1] for row in rows)
            fsyncs = statistics.median(row[2] for row in rows)
            for index, (name, _) in enumerate(builds):
                commit = statistics.median(row[0][index] for row in rows)
                print(f"{files:>6} {name:>5} {commit:>8.1f} {syncfs:>10.1f} {fsyncs:>10.1f} "
                      f"{commit / syncfs:>13.2f} {commit / fsyncs:>13.2f}", flush=True)
    finally:
        writer.kill()
        writer.wait()
        shutil.rmtree(base_dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default=None,
                        help="file counts (default 1000,10000,100000; with --busy 1,4,32)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--dir", default=None, help="where to make the workspaces")
    parser.add_argument("--bin", default=None, help="another pulsebox binary (to compare builds)")
    parser.add_argument("--old", default=None,
                        help="an older pulsebox binary, measured in the same rounds (before the new)")
    parser.add_argument("--busy", action="store_true",
                        help="small commits while another process writes to the file system")
    args = parser.parse_args()
    if args.bin:
        global BIN
        BIN = os.path.abspath(args.bin)
    builds = [("old", os.path.abspath(args.old))] if args.old else []
    builds.append(("new" if args.old else "", BIN))
    if args.busy:
        busy(args, builds)
        return
    print("== commits at copy speed: import + commit vs cp -a + sync (ms; peak RSS MB)")
    print(f"{'files':>7} {'build':>5} {'import':>9} {'commit':>9} {'cp+sync':>9} {'ratio':>6} "
          f"{'(sync':>6}) "
          f"{'run RSS':>8} {'commit RSS':>11} {'cp RSS':>7}")
    for files in (int(s) for s in (args.sizes or "1000,10000,100000").split(",")):
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
