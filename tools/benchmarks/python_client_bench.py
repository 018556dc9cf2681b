#!/usr/bin/env python3
"""The Python client's round trip (issue #22): `await sandbox.execute_command(["true"])`
through the local server's socket and through `pulsebox run --events`, beside
`subprocess.run(["true"])` and beside the CLI (`pulsebox run -- true`, which
goes through the same server when one runs, as it would for a user); and the
CLI and `run --events` again with no server (PULSEBOX_SERVER=off: the sandbox
made in the CLI's own process).

One process, the four interleaved round by round so the machine's drift hits
each alike; a private state directory and workspace; the server is started
for the run and stopped by its pid. Prints the median and p90 in ms and each
median's ratio to subprocess.run.
Usage: tools/benchmarks/python_client_bench.py [--rounds N] [--bin PULSEBOX]
"""
import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import pulsebox  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds (1..1000, default 50)")
    parser.add_argument("--bin", default=os.environ.get("PULSEBOX_BIN")
                        or os.path.join(ROOT, "build", "src", "cli", "pulsebox"))
    args = parser.parse_args()
    rounds = max(1, min(args.rounds, 1000))
    base = tempfile.mkdtemp(prefix="pbpy-bench-")
    os.chmod(base, 0o711)
    # One workspace per side, each with its own audit log.
    workspaces = {}
    for side in ("cli", "server", "events", "cli-alone", "events-alone"):
        workspaces[side] = os.path.join(base, side)
        os.mkdir(workspaces[side])
    os.environ.update(PULSEBOX_BIN=args.bin, PULSEBOX_STATE_DIR=os.path.join(base, "state"),
                      PULSEBOX_AUDIT_KEY=os.environ.get("PULSEBOX_AUDIT_KEY")
                      or os.path.join(base, "audit.key"), NO_COLOR="1")
    for name in ("PULSEBOX_SERVER", "PULSE_REMOTE_URL", "PULSE_REMOTE_TOKEN"):
        os.environ.pop(name, None)
    # An ordinary user may lack cgroups: the default limits are then reported, not refused.
    weaker = ["limits"]
    server = pulsebox.LocalServer(args.bin)
    samples: dict[str, list[float]] = {
        "subprocess.run": [], "pulsebox run (CLI)": [], "python, server socket": [],
        "python, run --events": [], "pulsebox run, no server": [], "python, --events, no server": []}
    try:
        server.start()
        via_server = pulsebox.Sandbox(workspaces["server"], transport="server", allow_weaker=weaker)
        via_cli = pulsebox.Sandbox(workspaces["events"], transport="cli", allow_weaker=weaker)
        alone = pulsebox.Sandbox(workspaces["events-alone"], transport="cli", allow_weaker=weaker)
        cli_argv = [args.bin, "run", "-w", workspaces["cli"], "--allow-weaker", "limits", "--", "true"]
        alone_argv = [args.bin, "run", "-w", workspaces["cli-alone"], "--allow-weaker", "limits",
                      "--", "true"]
        # With a server running, `pulsebox run` goes through it; PULSEBOX_SERVER=off runs the
        # sandbox in the CLI's own process, as when no server runs.
        no_server = dict(os.environ, PULSEBOX_SERVER="off")

        async def measure() -> None:
            await via_server.initialize()
            await via_cli.initialize()
            await alone.initialize()
            alone.transport.extra_env["PULSEBOX_SERVER"] = "off"
            for i in range(rounds + 2):  # two rounds of warm-up, not counted
                times = {}
                start = time.perf_counter()
                subprocess.run(["true"], check=True)
                times["subprocess.run"] = time.perf_counter() - start
                start = time.perf_counter()
                subprocess.run(cli_argv, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                times["pulsebox run (CLI)"] = time.perf_counter() - start
                start = time.perf_counter()
                subprocess.run(alone_argv, check=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=no_server)
                times["pulsebox run, no server"] = time.perf_counter() - start
                for name, sandbox in (("python, server socket", via_server),
                                      ("python, run --events", via_cli),
                                      ("python, --events, no server", alone)):
                    start = time.perf_counter()
                    result = await sandbox.execute_command(["true"])
                    times[name] = time.perf_counter() - start
                    if result.exit_code != 0:
                        raise SystemExit(f"{name}: exit {result.exit_code}: {result.stderr}")
                if i >= 2:
                    for name, seconds in times.items():
                        samples[name].append(seconds * 1000)

        asyncio.run(measure())
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)

    baseline = statistics.median(samples["subprocess.run"])
    print(f"round trip of `true`, {rounds} rounds interleaved")
    print(f"{'':28} {'median ms':>10} {'p90 ms':>8} {'x subprocess':>13}")
    for name, values in samples.items():
        values.sort()
        median = statistics.median(values)
        p90 = values[min(len(values) - 1, int(len(values) * 0.9))]
        print(f"{name:28} {median:10.2f} {p90:8.2f} {median / baseline:13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
