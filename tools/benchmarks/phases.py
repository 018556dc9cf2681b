#!/usr/bin/env python3
"""Where the time of one run goes, phase by phase (tools/bench phases).

Runs `pulsebox run -w WS --net none -- /bin/true` RUNS times, GAP ms apart,
with PULSEBOX_TRACE=1, and prints the median time of each traced phase:
  served (default): through the benchmarks' `pulsebox serve --local`
      (peers.Server), started with PULSEBOX_TRACE=1 and stopped afterwards;
      times count from the server's "server: connection" mark of each
      request;
  --in-process: PULSEBOX_SERVER=off; times count from the top of main().
The workspace is the peer benchmark's empty one. The first run (the
server's start-up probe, or the first in-process run) is left out. Lines
are in the order of their medians, each with the step from the line
before; init's and the command's marks ("child: ...") are the same clock,
so they interleave with the supervisor's. The server's work after its
answer (the teardown, the next sandbox started ahead) is traced on the
prestart thread's own clock and left out. Writes the medians to
build/bench/phases.json.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

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


def run_client(env, workspace):
    argv = [peers.PULSEBOX, "run", "-w", workspace, "--net", "none", "--", "/bin/true"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pulsebox run exited with {done.returncode}: {done.stderr.strip()}")
    return done.stderr


def served(workspace, runs, gap_s):
    """Each request's marks up to its answer; the first is the server's probe."""
    server = peers.Server(workspace, extra_env={"PULSEBOX_TRACE": "1"})
    try:
        for _ in range(runs):
            stderr = run_client(peers.pulsebox_env(server=True), workspace)
            if "running in this process" in stderr:
                raise RuntimeError("the server did not take the run: " + stderr.strip())
            time.sleep(gap_s)
    finally:
        server.stop()
    with open(server.log.name) as f:
        collected = parse_runs(f.read(), REQUEST_START)
    return [{phase: ms for phase, ms in run.items() if ms <= run[REPLIED]}
            for run in collected if REPLIED in run]


def in_process(workspace, runs, gap_s):
    env = dict(peers.pulsebox_env(), PULSEBOX_TRACE="1")
    collected = []
    for _ in range(runs + 1):
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
    if not os.access(peers.PULSEBOX, os.X_OK):
        sys.exit(f"phases: {peers.PULSEBOX} is not built (meson compile -C build)")
    os.makedirs(peers.BENCH, exist_ok=True)
    workspace = peers.make_workspace(os.path.join(peers.BENCH, "ws-empty"), 0)
    measure = in_process if args.in_process else served
    runs = [run for run in measure(workspace, args.runs, args.gap_ms / 1000)[1:] if run]
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
    with open(os.path.join(peers.BENCH, "phases.json"), "w") as f:
        json.dump({"kind": kind, "runs": len(runs), "gap_ms": args.gap_ms, "median_ms": table}, f,
                  indent=2)


if __name__ == "__main__":
    main()
