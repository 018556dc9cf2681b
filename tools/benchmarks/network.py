#!/usr/bin/env python3
"""Network modes: launch latency of /bin/true per --net mode, beside peers (tools/bench network).

Interleaved in one run, like tools/bench peers: pulsebox run with --net none,
proxy, allowlist and all, bwrap --unshare-net and
podman run --network none; medians and their ratio to bwrap. Runs as root, in
a network and mount namespace of its own (re-executed under unshare), where
it adds 169.254.40.1 to lo and turns forwarding on, so that `all` gets its
veth with NAT and nothing touches the machine's own network.
Usage: tools/benchmarks/network.py [--rounds N]
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402  (the same harness: posix_spawn -> wait4, interleaved)


def inside(rounds):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", "169.254.40.1/32", "dev", "lo"], check=True)
    with open("/proc/sys/net/ipv4/ip_forward", "w") as f:  # this namespace's own
        f.write("1")
    os.makedirs(peers.BENCH, exist_ok=True)
    workspace = peers.make_workspace(os.path.join(peers.BENCH, "ws-empty"), 0)
    env = peers.pulsebox_env()
    base = [peers.PULSEBOX, "run", "-w", workspace]
    modes = {
        "none": ["--net", "none"],
        "proxy": ["--net", "proxy", "--allow-domain", "example.test"],
        "allowlist": ["--net", "allowlist", "--allow", "169.254.40.1:80"],
        "all": ["--net", "all"],
    }
    reasons = {}
    runs = [peers.Peer(f"pulsebox --net {mode}", base + flags + ["--", "/bin/true"], env=env)
            for mode, flags in modes.items()]
    if peers.which("bwrap"):
        runs.append(peers.Peer("bwrap --unshare-net", [peers.which("bwrap"), "--unshare-net",
                                                       "--die-with-parent", "--ro-bind", "/", "/",
                                                       "/bin/true"]))
    else:
        reasons["bwrap"] = "bubblewrap is not installed"
    rootfs = peers.busybox_rootfs(os.path.join(peers.BENCH, "rootfs"))
    podman = peers.podman_setup(rootfs, reasons)
    if podman:
        podman.name = "podman --network none"
        runs.append(podman)
    for name, why in reasons.items():
        print(f"   skipped {name}: {why}")
    for peer in runs:
        peer.once()  # warm (and fail early)
        peer.samples.clear()
    peers.measure(runs, rounds)
    bwrap = next((p for p in runs if p.name.startswith("bwrap")), None)
    reference = statistics.median(bwrap.samples) if bwrap else None
    print(f"{'':<28} {'median ms':>10} {'p95 ms':>8} {'x bwrap':>8}")
    for peer in runs:
        median = statistics.median(peer.samples)
        ratio = f"{median / reference:.2f}" if reference else "-"
        print(f"{peer.name:<28} {median:>10.2f} {peers.percentile(peer.samples, 0.95):>8.2f} "
              f"{ratio:>8}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("tools/bench network needs root (allowlist and all make a veth pair)")
    if os.environ.get("PULSEBOX_NETWORK_BENCH") != "inside":
        env = dict(os.environ, PULSEBOX_NETWORK_BENCH="inside")
        argv = ["unshare", "--net", "--mount", "--propagation", "private", sys.executable,
                os.path.abspath(__file__), "--rounds", str(args.rounds)]
        sys.exit(subprocess.run(argv, env=env).returncode)
    print(f"== network: /bin/true per --net mode, {args.rounds} interleaved rounds")
    inside(args.rounds)


if __name__ == "__main__":
    main()
