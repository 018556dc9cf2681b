#!/usr/bin/env python3
"""The latency regression guard tools/check runs: pulsebox against bwrap, in one run.

`pulsebox run --net none -- /bin/true` in its own process and `bwrap
--unshare-all --ro-bind / / /bin/true`, interleaved (tools/benchmarks/peers.py's
harness: posix_spawn -> wait4), 30 rounds after a warm-up. It fails only when
pulsebox's median is more than LIMIT times bwrap's in the same run: the
documented ratio on this kind of machine is about 2 (docs/benchmarks.md), so
the limit is a regression well beyond noise, never an absolute time (the
machine's speed moves from minute to minute, and both tools move with it).
Usage: tools/benchmarks/regression.py [--rounds N] [--limit X]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--limit", type=float, default=4.0)
    args = parser.parse_args()
    bwrap = peers.which("bwrap")
    if not bwrap:
        sys.exit("regression guard: bubblewrap is not installed (tools/setup installs it)")
    os.makedirs(peers.BENCH, exist_ok=True)
    workspace = peers.make_workspace(os.path.join(peers.BENCH, "ws-empty"), 0)
    runs = [peers.pulsebox_peer("pulsebox", workspace),
            peers.Peer("bwrap", peers.bwrap_true(bwrap))]
    for peer in runs:
        peer.once()
        peer.samples.clear()
    peers.measure(runs, args.rounds)
    ours, theirs = (statistics.median(peer.samples) for peer in runs)
    ratio = ours / theirs
    verdict = "ok" if ratio <= args.limit else "REGRESSION"
    print(f"regression guard: pulsebox {ours:.2f} ms, bwrap {theirs:.2f} ms (medians of "
          f"{args.rounds}): {ratio:.2f} x bwrap, limit {args.limit:.1f}: {verdict}")
    sys.exit(0 if ratio <= args.limit else 1)


if __name__ == "__main__":
    main()
