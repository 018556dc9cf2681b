#!/usr/bin/env python3
"""Sessions: what a run costs with a session behind it, and a session's commit.

Measured in one process, interleaved, so the machine's drift hits both sides:
  - `run --session S -- true` after 1, 10 and 100 earlier runs of S (each
    wrote a file), against `run -- true` with no session: the ratio is the
    session's cost per run (its lock, its layer on the overlay, the merge of
    the run's layer into it);
  - `session commit` of one session run that changed 10,000 files, against
    `cp -a` + `sync` of the same files, against `commit` of a transaction
    with the same 10,000 files (run and commit together: what committing
    through a session adds) and against an older build's (--old BIN),
    rounds interleaved;
  - `session show` and `session diff --stat` of a session whose run wrote
    2,000 files of 16 KiB, against `git diff --no-index --stat` of an empty
    directory and the session's layer (the same files read and counted),
    and against an older build's (--old BIN), rounds interleaved.
Usage: tools/benchmarks/sessions.py [--rounds N] [--files N] [--old BIN] [--only review|commit]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "build", "src", "cli", "pulsebox")


def env(state):
    e = dict(os.environ)
    e.update({"PULSEBOX_STATE_DIR": state, "PULSEBOX_SERVER": "off", "NO_COLOR": "1"})
    return e


def timed(command, state, ok=(0,)):
    """Runs `command`; its wall time in ms. Exits on a status not in `ok`."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env(state), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode not in ok:
        sys.exit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return elapsed


def pulsebox(args, state):
    return timed([BIN] + args, state)


def run(ws, state, command, session=None):
    args = ["run", "--allow-weaker", "limits", "-w", ws]
    if session:
        args += ["--session", session]
    return pulsebox(args + ["--", "sh", "-c", command], state)


def run_long(ws, state, command, session=None):
    args = ["run", "--allow-weaker", "limits", "--timeout", "300", "-w", ws]
    if session:
        args += ["--session", session]
    return pulsebox(args + ["--", "sh", "-c", command], state)


def latency(rounds):
    print("== run latency with a session behind it (median ms, ratio to no session)")
    print(f"{'earlier runs':>13} {'no session':>11} {'session':>9} {'ratio':>7}")
    for earlier in (1, 10, 100):
        base = tempfile.mkdtemp(prefix="pb-bench-")
        os.chmod(base, 0o711)  # the sandbox's init must reach the state directory
        try:
            ws, state = os.path.join(base, "ws"), os.path.join(base, "state")
            os.makedirs(ws)
            for i in range(earlier):
                run(ws, state, f"echo {i} > file{i}.txt", session="s")
            plain, with_session = [], []
            for _ in range(rounds):
                plain.append(run(ws, state, "true"))
                with_session.append(run(ws, state, "true", session="s"))
            a, b = statistics.median(plain), statistics.median(with_session)
            print(f"{earlier:>13} {a:>8.1f} ms {b:>6.1f} ms {b / a:>7.2f}")
        finally:
            shutil.rmtree(base, ignore_errors=True)


def commit(files, rounds, old):
    print(f"== committing {files} changed files (median ms of {rounds} rounds)")
    make = f"mkdir -p out && i=0; while [ $i -lt {files} ]; do echo $i > out/f$i; i=$((i+1)); done"
    base = tempfile.mkdtemp(prefix="pb-bench-")
    os.chmod(base, 0o711)
    builds = [("this build", BIN)] + ([("--old", old)] if old else [])
    times = {}

    def note(name, ms):
        times.setdefault(name, []).append(ms)

    try:
        ws, state, copy = (os.path.join(base, name) for name in ("ws", "state", "copy"))
        os.makedirs(ws)
        for round_ in range(rounds):
            # Every round deletes what the last one made: the builds take
            # turns going first, so neither always follows the deletions.
            order = builds if round_ % 2 == 0 else list(reversed(builds))
            shutil.rmtree(os.path.join(ws, "out"), ignore_errors=True)
            note("transaction: run", run_long(ws, state, make))
            note("transaction: commit", pulsebox(["commit", "-w", ws, "latest"], state))
            for name, binary in order:
                shutil.rmtree(os.path.join(ws, "out"), ignore_errors=True)
                note("session: run", run_long(ws, state, make, "s"))
                kept = os.path.join(state, "kept")
                layer = [os.path.join(kept, d, "0", "out") for d in os.listdir(kept)
                         if d.startswith("session-")][0]
                # The peer: the same files copied and made durable.
                note("cp -a + sync", timed(["sh", "-c", f"cp -a {layer} {copy} && sync"], state))
                shutil.rmtree(copy)
                note(f"session commit ({name})",
                     timed([binary, "session", "commit", "-w", ws, "s"], state))
        peer = statistics.median(times["cp -a + sync"])
        for name, measured in times.items():
            m = statistics.median(measured)
            ratio = f"{m / peer:>6.2f} x cp -a + sync" if "commit" in name else ""
            print(f"{name:<28} {m:>8.0f} ms {ratio}")
        # A run's transaction is imported at the end of the run; a session's
        # when it is committed: compare run + commit on both sides.
        both = {side: statistics.median(times[f"{side}: run"]) +
                statistics.median(times[f"{side}: commit" if side == "transaction"
                                        else "session commit (this build)"])
                for side in ("transaction", "session")}
        print(f"ratio session / transaction (run and commit): "
              f"{both['session'] / both['transaction']:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def review(rounds, old, files=2000, size=16384):
    print(f"== reviewing a session of {files} new files of {size} bytes (median ms)")
    make = (f"mkdir -p out && i=0; while [ $i -lt {files} ]; do head -c {size} /dev/urandom "
            f"| od -An -x > out/f$i; i=$((i+1)); done")
    base = tempfile.mkdtemp(prefix="pb-bench-")
    os.chmod(base, 0o711)
    try:
        ws, state, empty = (os.path.join(base, name) for name in ("ws", "state", "empty"))
        os.makedirs(ws)
        os.makedirs(empty)
        pulsebox(["run", "--allow-weaker", "limits", "--timeout", "300", "--session", "s", "-w",
                  ws, "--", "sh", "-c", make], state)
        kept = os.path.join(state, "kept")
        layer = [os.path.join(kept, d, "0") for d in os.listdir(kept) if d.startswith("session-")]
        builds = [("this build", BIN)] + ([("--old", old)] if old else [])
        commands = {}
        for name, binary in builds:
            commands[f"show ({name})"] = [binary, "session", "show", "-w", ws, "s"]
            commands[f"diff --stat ({name})"] = [binary, "session", "diff", "--stat", "--all",
                                                 "-w", ws, "s"]
        commands["git diff --no-index --stat"] = ["git", "diff", "--no-index", "--stat", empty,
                                                  layer[0]]
        times = {name: [] for name in commands}
        for _ in range(rounds):
            for name, command in commands.items():
                # git diff --no-index says 1 for "the trees differ".
                times[name].append(timed(command, state, ok=(0, 1)))
        git = statistics.median(times["git diff --no-index --stat"])
        for name, measured in times.items():
            m = statistics.median(measured)
            print(f"{name:<28} {m:>8.1f} ms {m / git:>6.2f} x git")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--old", help="an older pulsebox binary to review with too")
    parser.add_argument("--only", choices=["review", "commit"])
    options = parser.parse_args()
    if options.only is None:
        latency(options.rounds)
    if options.only in (None, "commit"):
        commit(options.files, min(options.rounds, 5), options.old)
    if options.only in (None, "review"):
        review(min(options.rounds, 10), options.old)


if __name__ == "__main__":
    main()
