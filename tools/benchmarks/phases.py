#!/usr/bin/env python3
"""Where the time of one run goes, phase by phase (tools/bench phases).

Runs `pulsebox run -w WS --net none -- /bin/true` RUNS times, GAP ms apart,
with PULSEBOX_TRACE=1, and prints the median time of each traced phase:
  served (default): through a `pulsebox serve --local` of its own, started
      with PULSEBOX_TRACE=1 on a state directory of its own and stopped
      afterwards (SIGTERM to its pid); times count from the server's
      "server: connection" mark of each request;
  --in-process: PULSEBOX_SERVER=off; times count from the top of main().
The first run (caches, the server's first sandbox) is left out. Lines are
in the order of their medians, each with the step from the line before;
init's and the command's marks ("child: ...") are the same clock, so they
interleave with the supervisor's. The server's work after its answer (the
teardown, the next sandbox started ahead) is traced on another clock and
left out. Writes the medians to build/bench/phases.json.
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "build", "bench")
PULSEBOX = os.path.join(ROOT, "build", "src", "cli", "pulsebox")
TRACE_LINE = re.compile(r"^pulsebox trace:\s+([0-9.]+) ms .*?faults\s+\d+\s+(.*)$")
# Where a served request's marks begin, and the answer's last mark.
REQUEST_START = "server: connection"
REPLIED = "server: replied"


def parse_runs(text, start_mark):
    """The trace lines of `text` as one {phase: ms} per run; a run begins at
    each `start_mark` (None: one run for the whole text). The first time a
    phase appears in a run counts."""
    runs, current = [], None
    if start_mark is None:
        current = {}
        runs.append(current)
    for line in text.splitlines():
        match = TRACE_LINE.match(line.rstrip())
        if not match:
            continue
        ms, phase = float(match.group(1)), match.group(2)
        if start_mark is not None and phase == start_mark:
            current = {}
            runs.append(current)
        if current is not None and phase not in current:
            current[phase] = ms
    return runs


def medians(runs):
    """The median of each phase that at least half of the runs reached (a
    line printed once, like the server's own start, is not a run's phase)."""
    phases = {}
    for run in runs:
        for phase, ms in run.items():
            phases.setdefault(phase, []).append(ms)
    return {phase: statistics.median(values) for phase, values in phases.items()
            if 2 * len(values) >= len(runs)}


def make_workspace(path):
    os.makedirs(path, exist_ok=True)
    for i in range(20):
        with open(os.path.join(path, f"f{i}.txt"), "w") as f:
            f.write("x\n")


def run_client(env, workspace):
    argv = [PULSEBOX, "run", "-w", workspace, "--net", "none", "--", "/bin/true"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pulsebox run exited with {done.returncode}: {done.stderr.strip()}")
    return done.stderr


def served(scratch, workspace, runs, gap_s):
    state = os.path.join(scratch, "state")
    log_path = os.path.join(scratch, "server.log")
    env = dict(os.environ, PULSEBOX_STATE_DIR=state, NO_COLOR="1", PULSEBOX_TRACE="1")
    socket = os.path.join(state, "server.sock")
    with open(log_path, "w") as log:
        server = subprocess.Popen([PULSEBOX, "serve", "--local"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 10
        while not os.path.exists(socket):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("pulsebox serve --local did not start: " + open(log_path).read())
            time.sleep(0.01)
        client_env = dict(env, PULSEBOX_SERVER=socket)
        del client_env["PULSEBOX_TRACE"]
        for _ in range(runs):
            stderr = run_client(client_env, workspace)
            if "running in this process" in stderr:
                raise RuntimeError("the server did not take the run: " + stderr.strip())
            time.sleep(gap_s)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
    with open(log_path) as f:
        runs = parse_runs(f.read(), REQUEST_START)
    # The prestart thread's marks between requests (the teardown, the next
    # sandbox) count from that thread's own start: only a request's own
    # marks, up to its answer, are kept.
    return [{phase: ms for phase, ms in run.items() if ms <= run[REPLIED]}
            for run in runs if REPLIED in run]


def in_process(scratch, workspace, runs, gap_s):
    env = dict(os.environ, PULSEBOX_STATE_DIR=os.path.join(scratch, "state"), NO_COLOR="1",
               PULSEBOX_SERVER="off", PULSEBOX_TRACE="1")
    collected = []
    for _ in range(runs):
        collected += parse_runs(run_client(env, workspace), None)
        time.sleep(gap_s)
    return collected


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--in-process", action="store_true", help="PULSEBOX_SERVER=off")
    parser.add_argument("--runs", type=int, default=40, help="runs (default 40)")
    parser.add_argument("--gap-ms", type=float, default=30.0, help="pause between runs")
    args = parser.parse_args()
    if args.runs < 1 or args.runs > 10000 or args.gap_ms < 0:
        parser.error("--runs takes 1 to 10000 and --gap-ms a time >= 0")
    if not os.access(PULSEBOX, os.X_OK):
        sys.exit(f"phases: {PULSEBOX} is not built (meson compile -C build)")
    os.makedirs(BENCH, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="phases-", dir=BENCH)
    # The sandbox's unprivileged ids mount from inside the state directory.
    os.chmod(scratch, 0o755)
    try:
        workspace = os.path.join(scratch, "ws")
        make_workspace(workspace)
        measure = in_process if args.in_process else served
        runs = measure(scratch, workspace, args.runs + 1, args.gap_ms / 1000)[1:]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    runs = [run for run in runs if run]
    if not runs:
        sys.exit("phases: no trace lines were printed (is PULSEBOX_TRACE honoured?)")
    table = medians(runs)
    # A breakdown without init's and the command's marks would hide most of
    # the run (tools/check runs this to keep the tracing whole).
    if not any(phase.startswith("child: ") for phase in table):
        sys.exit("phases: no marks of init or the command (child: ...) in the trace")
    kind = "in-process" if args.in_process else "served"
    origin = "main()" if args.in_process else f'"{REQUEST_START}"'
    print(f"== phases of {kind} runs of /bin/true: medians of {len(runs)} runs "
          f"{args.gap_ms:g} ms apart, ms since {origin}")
    previous = 0.0
    for phase, ms in sorted(table.items(), key=lambda item: item[1]):
        print(f"{ms:9.3f}  (+{ms - previous:6.3f})  {phase}")
        previous = ms
    with open(os.path.join(BENCH, "phases.json"), "w") as f:
        json.dump({"kind": kind, "runs": len(runs), "gap_ms": args.gap_ms, "median_ms": table}, f,
                  indent=2)


if __name__ == "__main__":
    main()
