#!/usr/bin/env python3
"""pulsebox against its peers, on this machine, in one run (tools/bench peers).

Measures, interleaved so that every tool sees the same machine state:
  1. start-to-exit latency of /bin/true: plain (the floor), unshare -Urmpfn,
     bwrap, crun and runc on a minimal bundle, podman run --rm, pulsebox run
     (full isolation: every namespace, overlay workspace, seccomp "default",
     cgroup limits, --net none);
  2. the same latency back to back (no pause between runs) for the floor,
     bwrap and pulsebox in-process and served, in alternating chunks;
  3. throughput: sandboxes completed per second with 1, 2, 4 parallel
     clients, pulsebox in-process, served and bwrap, per client count,
     with the whole machine's CPU time per run (/proc/stat: kernel work in
     kworkers counts; what bounds throughput once the cores are busy);
  4. footprint: the pulsebox supervisor's own peak RSS (PULSEBOX_TRACE);
  5. latency with an empty workspace vs one with 100,000 files.
Then compares the ratios with the targets at the top of docs/benchmarks.md
(the older ones and issue #24's), writes build/bench/peers.json and plots
build/bench/latency.png (gnuplot).

Each timing is posix_spawn -> wait4 in this process, so every tool pays the
same harness cost (the floor shows it). A peer that cannot run here is
skipped with the reason. Needs root for crun, runc and podman.
"""
import argparse
import functools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "build", "bench")
PULSEBOX = os.path.join(ROOT, "build", "src", "cli", "pulsebox")

# Targets (docs/benchmarks.md): pulsebox median / peer median.
TARGETS = [
    ("bwrap", 0.8, "<="),
    ("crun", 0.4, "<="),
    ("podman", 1 / 50, "<="),
    ("unshare", 1.5, "<="),
]
RSS_TARGET_KIB = 8 * 1024
WORKSPACE_SCALE_TARGET = 1.10
# Issue #24 (performance round two), each in both latency regimes where it
# names one: "idle gaps" is the interleaved table (a run comes after the
# other tools' runs), "back to back" the chunks with no pause between runs.
IN_PROCESS_VS_BWRAP = 1.0      # #24.1: in-process median / bwrap median
SERVED_VS_BWRAP = 0.5          # #24.2: served median / bwrap median
SERVED_OVER_FLOOR_MS = 1.0     # #24.2 stretch: served median - floor median
SERVED_RUNS_VS_BWRAP = 1.5     # #24.3: served runs/s / bwrap runs/s
THROUGHPUT_TARGET_CLIENTS = 4  # #24.3: "with 4 clients on 2 cores"


def log(message):
    print(message, flush=True)


def run_once(argv, env=None):
    """Runs argv to completion; returns (milliseconds, exit status, ru_maxrss kB).
    posix_spawn (vfork underneath): the harness's own cost stays small."""
    devnull = os.open(os.devnull, os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env if env is not None else os.environ,
                         file_actions=actions)
    _, status, usage = os.wait4(pid, 0)
    elapsed = (time.perf_counter() - start) * 1000
    os.close(devnull)
    return elapsed, os.waitstatus_to_exitcode(status), usage.ru_maxrss


def percentile(values, fraction):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1)))))
    return ordered[index]


class Peer:
    def __init__(self, name, argv, env=None, runs=None, cleanup=None):
        self.name, self.argv, self.env = name, argv, env
        self.runs, self.cleanup = runs, cleanup
        self.samples = []

    def once(self):
        elapsed, status, _ = run_once(self.argv, self.env)
        if status != 0:
            raise RuntimeError(f"{self.name} exited with {status}: {' '.join(self.argv)}")
        self.samples.append(elapsed)
        if self.cleanup:
            self.cleanup()


def which(name):
    return shutil.which(name)


def busybox_rootfs(path):
    """A minimal root file system: busybox-static and /bin/true."""
    if os.path.exists(os.path.join(path, "bin", "true")):
        return path
    os.makedirs(os.path.join(path, "bin"), exist_ok=True)
    for d in ("proc", "sys", "dev", "tmp", "etc"):
        os.makedirs(os.path.join(path, d), exist_ok=True)
    shutil.copy2("/bin/busybox", os.path.join(path, "bin", "busybox"))
    os.symlink("busybox", os.path.join(path, "bin", "true"))
    os.symlink("busybox", os.path.join(path, "bin", "sh"))
    return path


def oci_bundle(runtime, bundle, rootfs):
    """runtime spec (root), running /bin/true from a read-only busybox rootfs."""
    os.makedirs(bundle, exist_ok=True)
    config = os.path.join(bundle, "config.json")
    if os.path.exists(config):
        os.remove(config)
    subprocess.run([runtime, "spec", "--bundle", bundle], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(config) as f:
        spec = json.load(f)
    spec["process"]["args"] = ["/bin/true"]
    spec["process"]["terminal"] = False
    spec["root"] = {"path": rootfs, "readonly": True}
    # Its own cgroup path, created and removed by the runtime on each run.
    spec["linux"]["cgroupsPath"] = f"/pulsebox-bench/{os.path.basename(runtime)}"
    with open(config, "w") as f:
        json.dump(spec, f)
    return bundle


def hidden_unified_namespace():
    """crun 1.8 refuses hybrid cgroups: a helper process whose private mount
    namespace lacks /sys/fs/cgroup/unified; crun runs in it through nsenter
    (whose exec the crun numbers include). Returns (helper, argv prefix)."""
    if not os.path.ismount("/sys/fs/cgroup/unified"):
        return None, []
    helper = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         "umount /sys/fs/cgroup/unified && echo ready && exec sleep 3600"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if helper.stdout.readline().strip() != b"ready":
        helper.kill()
        return None, []
    return helper, [which("nsenter"), f"--mount=/proc/{helper.pid}/ns/mnt", "--"]


def podman_setup(rootfs, reasons):
    """podman with its storage under build/bench and an imported busybox image."""
    if not which("podman"):
        reasons["podman"] = "podman is not installed"
        return None
    conf = os.path.join(BENCH, "containers.conf")
    with open(conf, "w") as f:
        # root lacks CAP_SYS_RESOURCE here: podman's default ulimits would fail.
        f.write('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')
    env = dict(os.environ, CONTAINERS_CONF=conf)
    base = [which("podman"), "--root", os.path.join(BENCH, "podman", "root"),
            "--runroot", os.path.join(BENCH, "podman", "run"), "--storage-driver", "overlay"]
    tarball = os.path.join(BENCH, "rootfs.tar")
    with tarfile.open(tarball, "w") as tar:
        tar.add(rootfs, arcname=".")
    imported = subprocess.run(base + ["import", tarball, "pulsebox-bench:latest"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if imported.returncode != 0:
        reasons["podman"] = "podman import failed: " + imported.stderr.strip()[-300:]
        return None
    # podman's default runtime is crun, which refuses hybrid cgroups; runc does not.
    runtime = ["--runtime", which("runc")] if os.path.ismount("/sys/fs/cgroup/unified") and which("runc") else []
    argv = base + runtime + ["run", "--rm", "--network", "none", "pulsebox-bench:latest", "/bin/true"]
    probe = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    if probe.returncode != 0:
        reasons["podman"] = "podman run failed: " + probe.stderr.strip()[-300:]
        return None
    return Peer("podman", argv, env=env, runs=20)


def make_workspace(path, files):
    os.makedirs(path, exist_ok=True)
    marker = os.path.join(path, f".files-{files}")
    if os.path.exists(marker):
        return path
    for i in range(files):
        directory = os.path.join(path, f"d{i // 1000:03d}")
        if i % 1000 == 0:
            os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"f{i}.txt"), "w") as f:
            f.write("x\n")
    open(marker, "w").close()
    return path


def pulsebox_env(server=False):
    """In-process runs never find a server (PULSEBOX_SERVER=off); server runs
    use the state directory the benchmark's `pulsebox serve --local` serves."""
    if server:
        return dict(os.environ, PULSEBOX_STATE_DIR=os.path.join(BENCH, "state-server"),
                    NO_COLOR="1")
    return dict(os.environ, PULSEBOX_STATE_DIR=os.path.join(BENCH, "state"), NO_COLOR="1",
                PULSEBOX_SERVER="off")


def bwrap_true(bwrap):
    """The bwrap run every ratio here is against: /bin/true, every namespace."""
    return [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "/bin/true"]


def pulsebox_peer(name, workspace, server=False):
    return Peer(name, [PULSEBOX, "run", "-w", workspace, "--net", "none", "--", "/bin/true"],
                env=pulsebox_env(server))


def socket_identity(path):
    """(device, inode) of the file at `path`, or None when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class Server:
    """`pulsebox serve --local` for the benchmark's runs, on its own state
    directory. Its runs are measured like every other tool's, from the
    client's posix_spawn to its exit."""

    def __init__(self, workspace, extra_env=None):
        self.env = dict(pulsebox_env(server=True), **(extra_env or {}))
        self.log = open(os.path.join(BENCH, "server.log"), "w")
        socket = os.path.join(self.env["PULSEBOX_STATE_DIR"], "server.sock")
        # A socket already there may be another server's (one an interrupted
        # benchmark left running): only a socket this server made counts.
        before = socket_identity(socket)
        self.process = subprocess.Popen([PULSEBOX, "serve", "--local"], env=self.env,
                                        stdout=self.log, stderr=self.log)
        try:
            self.wait_until_serving(workspace, socket, before)
        except BaseException:
            self.stop()
            raise

    def wait_until_serving(self, workspace, socket, before):
        deadline = time.monotonic() + 10
        while socket_identity(socket) in (None, before):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("pulsebox serve --local did not start: " + self.log_text())
            time.sleep(0.01)
        # A run that the server did (the client would say so if it fell back).
        probe = subprocess.run([PULSEBOX, "run", "-w", workspace, "--", "/bin/true"],
                               env=dict(self.env, PULSEBOX_SERVER=socket),
                               capture_output=True, text=True)
        if probe.returncode != 0 or "running in this process" in probe.stderr:
            raise RuntimeError("pulsebox serve --local does not serve runs: " + probe.stderr)
        if self.process.poll() is not None:
            raise RuntimeError("pulsebox serve --local exited: " + self.log_text())

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read().strip() or "(nothing in " + self.log.name + ")"

    def peak_rss_kib(self):
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return None

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.log.close()


def measure(peers, rounds, gap_s=0.0):
    # Each round in a new order: a run right after podman's pays for the
    # cleanup podman leaves running in the background, and with a fixed
    # order the same peer would pay it every time. Seeded: reruns compare.
    # `gap_s`: an untimed pause after each sample (what other tools' runs
    # are in the main table), so no sample starts on the last one's teardown.
    order = random.Random(8)
    for round_index in range(rounds):
        shuffled = list(peers)
        order.shuffle(shuffled)
        for peer in shuffled:
            if peer.runs is None or round_index < peer.runs:
                peer.once()
                if gap_s:
                    time.sleep(gap_s)


def back_to_back(peers, chunks, per_chunk):
    """Each peer's runs with no pause between them: `chunks` blocks of
    `per_chunk` runs per peer, the peers' blocks in turn and their order
    reversed every other chunk, so all see the same minute. Each block starts
    with one untimed run: its predecessor was another tool's run."""
    for chunk in range(chunks):
        for peer in (peers if chunk % 2 == 0 else peers[::-1]):
            peer.once()
            peer.samples.pop()
            for _ in range(per_chunk):
                peer.once()


def summary(peer):
    s = peer.samples
    return {"runs": len(s), "median_ms": statistics.median(s), "p95_ms": percentile(s, 0.95),
            "p99_ms": percentile(s, 0.99)}


def machine_busy_ticks():
    """Every CPU's busy time since boot, in clock ticks (/proc/stat): kernel
    work done in kworkers for a run (namespace and mount teardown) counts."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return user + nice + system + irq + softirq


def throughput(argv, env, clients, seconds):
    """Runs per second, and the machine's CPU milliseconds per run."""
    done = [0] * clients
    stop = time.perf_counter() + seconds

    def client(index):
        while time.perf_counter() < stop:
            if subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                done[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    busy_before = machine_busy_ticks()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    busy_ms = (machine_busy_ticks() - busy_before) * 1000 / os.sysconf("SC_CLK_TCK")
    runs = sum(done)
    return runs / (time.perf_counter() - start), (busy_ms / runs if runs else None)


def supervisor_rss(workspace, runs=10):
    env = dict(pulsebox_env(), PULSEBOX_TRACE="1")
    peaks = []
    for _ in range(runs):
        out = subprocess.run([PULSEBOX, "run", "-w", workspace, "--net", "none", "--", "/bin/true"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in out.stderr.splitlines():
            if line.startswith("pulsebox trace:") and "main: returning" in line:
                peaks.append(int(line.split("peak rss")[1].split("kB")[0]))
    return max(peaks) if peaks else None


def plot(results, path):
    if not which("gnuplot"):
        return "gnuplot is not installed"
    data = os.path.join(BENCH, "latency.dat")
    with open(data, "w") as f:
        for name, r in results.items():
            f.write(f'"{name}" {r["median_ms"]:.3f} {r["p95_ms"]:.3f}\n')
    script = f"""
set terminal pngcairo size 900,480 font ",11"
set output "{path}"
set title "start-to-exit latency of /bin/true (median and p95, ms; lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set ylabel "ms"
set logscale y
set yrange [1:*]
set xtics rotate by -20
set key top left
plot "{data}" using 2:xtic(1) title "median", "" using 3 title "p95"
"""
    result = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    return None if result.returncode == 0 else result.stderr.strip()


def main():
    # What the benchmark starts is stopped however it ends (a peer that
    # fails raises): a server or a helper left behind would hold on to the
    # next run's state directory and mount namespace.
    cleanups = [remove_bench_cgroups]
    try:
        return benchmark(cleanups)
    finally:
        for cleanup in reversed(cleanups):
            cleanup()


def stop_helper(helper):
    helper.send_signal(signal.SIGKILL)
    helper.wait()


def remove_bench_cgroups():
    """The runtimes' own cgroups (cgroupsPath /pulsebox-bench/...), if any
    stayed: only that tree, deepest first, and only empty directories."""
    for top in ("/sys/fs/cgroup/pulsebox-bench",) + tuple(
            f"/sys/fs/cgroup/{c}/pulsebox-bench" for c in os.listdir("/sys/fs/cgroup")):
        if not os.path.isdir(top):
            continue
        for directory, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            try:
                os.rmdir(directory)
            except OSError:
                pass


def benchmark(cleanups):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="interleaved rounds (default 60)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, no 100k workspace")
    args = parser.parse_args()
    rounds = 15 if args.quick else args.rounds
    os.makedirs(BENCH, exist_ok=True)
    reasons = {}
    is_root = os.geteuid() == 0

    empty_ws = make_workspace(os.path.join(BENCH, "ws-empty"), 0)
    rootfs = busybox_rootfs(os.path.join(BENCH, "rootfs"))
    peers = [Peer("floor (/bin/true)", ["/bin/true"])]
    if which("unshare"):
        peers.append(Peer("unshare", [which("unshare"), "-Urmpfn", "--mount-proc", "/bin/true"]))
    else:
        reasons["unshare"] = "unshare is not installed"
    if which("bwrap"):
        peers.append(Peer("bwrap", bwrap_true(which("bwrap"))))
    else:
        reasons["bwrap"] = "bubblewrap is not installed"
    for runtime in ("crun", "runc"):
        if not which(runtime):
            reasons[runtime] = f"{runtime} is not installed"
            continue
        if not is_root:
            reasons[runtime] = f"{runtime} needs root here"
            continue
        bundle = oci_bundle(which(runtime), os.path.join(BENCH, f"bundle-{runtime}"), rootfs)
        prefix = []
        if runtime == "crun":
            helper, prefix = hidden_unified_namespace()
            if helper:
                cleanups.append(functools.partial(stop_helper, helper))
        peer = Peer(runtime, prefix + [which(runtime), "run", "--bundle", bundle,
                                       f"pulsebox-bench-{os.getpid()}"])
        try:
            peer.once()
            peer.samples.clear()
            peers.append(peer)
        except RuntimeError as error:
            reasons[runtime] = str(error)
    if is_root:
        podman = podman_setup(rootfs, reasons)
        if podman:
            peers.append(podman)
    else:
        reasons["podman"] = "podman needs root here (rootless podman needs a login session)"
    peers.append(pulsebox_peer("pulsebox (in-process)", empty_ws))
    server = None
    try:
        server = Server(empty_ws)
        cleanups.append(server.stop)
        peers.append(pulsebox_peer("pulsebox (server)", empty_ws, server=True))
    except (OSError, RuntimeError) as error:
        reasons["pulsebox (server)"] = str(error)

    log(f"== latency: {rounds} interleaved rounds of {', '.join(p.name for p in peers)}")
    for name, why in reasons.items():
        log(f"   skipped {name}: {why}")
    for peer in peers:  # warm caches (the seccomp filter cache, page cache)
        if peer.runs is None:
            peer.once()
            peer.samples.clear()
    measure(peers, rounds)
    results = {p.name: summary(p) for p in peers}
    floor = results["floor (/bin/true)"]["median_ms"]
    bwrap = results.get("bwrap", {}).get("median_ms")
    log(f"{'tool':<22} {'runs':>5} {'median':>9} {'p95':>9} {'p99':>9} {'/floor':>8} {'/bwrap':>8}")
    for name, r in results.items():
        vs_bwrap = f"{r['median_ms'] / bwrap:8.2f}" if bwrap else "       -"
        log(f"{name:<22} {r['runs']:>5} {r['median_ms']:7.2f}ms {r['p95_ms']:7.2f}ms "
            f"{r['p99_ms']:7.2f}ms {r['median_ms'] / floor:8.2f} {vs_bwrap}")

    b2b_chunks, b2b_runs = (2, 10) if args.quick else (4, 15)
    log(f"== latency back to back: {b2b_chunks} chunks of {b2b_runs} runs per tool, "
        "no pause between runs, tool order alternating")
    b2b_peers = [Peer(p.name, p.argv, p.env) for p in peers
                 if p.name in ("floor (/bin/true)", "bwrap", "pulsebox (in-process)",
                               "pulsebox (server)")]
    back_to_back(b2b_peers, b2b_chunks, b2b_runs)
    b2b = {p.name: summary(p) for p in b2b_peers}
    b2b_floor = b2b["floor (/bin/true)"]["median_ms"]
    b2b_bwrap = b2b.get("bwrap", {}).get("median_ms")
    log(f"{'tool':<22} {'runs':>5} {'median':>9} {'p95':>9} {'/floor':>8} {'/bwrap':>8}")
    for name, r in b2b.items():
        r["vs_bwrap"] = r["median_ms"] / b2b_bwrap if b2b_bwrap else None
        vs_bwrap = f"{r['vs_bwrap']:8.2f}" if b2b_bwrap else "       -"
        log(f"{name:<22} {r['runs']:>5} {r['median_ms']:7.2f}ms {r['p95_ms']:7.2f}ms "
            f"{r['median_ms'] / b2b_floor:8.2f} {vs_bwrap}")

    cpus = os.cpu_count()
    log(f"== throughput: sandboxes per second (/bin/true; {cpus} cpus), "
        "kinds in turn per client count")
    tput, tput_vs_bwrap, cpu_per_run = {}, {}, {}
    kinds = [("in-process", pulsebox_peer("pulsebox", empty_ws))]
    if server:
        kinds.append(("server", pulsebox_peer("pulsebox", empty_ws, server=True)))
    bwrap_peer = next((p for p in peers if p.name == "bwrap"), None)
    if bwrap_peer:  # the latency table's argv
        kinds.append(("bwrap", bwrap_peer))
    for clients in (1, 2, 4):
        for kind, peer in kinds:
            rate, cpu_ms = throughput(peer.argv, peer.env, clients, 2 if args.quick else 4)
            tput.setdefault(kind, {})[clients] = rate
            cpu_per_run.setdefault(kind, {})[clients] = cpu_ms
            cpu_text = f", {cpu_ms:.2f} ms of the machine's CPU per run" if cpu_ms else ""
            log(f"   {kind:<10} {clients} client(s): {rate:.1f}/s{cpu_text}")
        if "server" in tput and "bwrap" in tput and tput["bwrap"][clients]:
            tput_vs_bwrap[clients] = tput["server"][clients] / tput["bwrap"][clients]
            log(f"   served / bwrap, {clients} client(s): {tput_vs_bwrap[clients]:.2f}")

    log("== footprint: peak RSS")
    rss = supervisor_rss(empty_ws)
    log(f"   in-process supervisor: {rss} kB" if rss else "   (no PULSEBOX_TRACE output)")
    server_rss = server.peak_rss_kib() if server else None
    if server_rss:
        log(f"   pulsebox serve --local, after every run above: {server_rss} kB")

    scale = None
    if not args.quick:
        log("== workspace size: empty vs 100,000 files")
        big = make_workspace(os.path.join(BENCH, "ws-100k"), 100_000)
        scale = {}
        paths = [("in-process", False)] + ([("server", True)] if server else [])
        for kind, through_server in paths:
            small_peer = pulsebox_peer("empty", empty_ws, server=through_server)
            big_peer = pulsebox_peer("100k", big, server=through_server)
            # Server runs 20 ms apart, as other tools' runs keep them in the
            # main table (back to back, each would start on the previous
            # one's teardown); in-process runs back to back, as before (a
            # pause makes each pay the v1 attach's grace period, noise here).
            measure([small_peer, big_peer], 30, gap_s=0.02 if through_server else 0.0)
            scale[kind] = statistics.median(big_peer.samples) / statistics.median(small_peer.samples)
            log(f"   {kind:<10} median {statistics.median(small_peer.samples):.2f} ms vs "
                f"{statistics.median(big_peer.samples):.2f} ms: ratio {scale[kind]:.3f}")

    log("== targets (docs/benchmarks.md)")
    verdicts = []
    for name in ("pulsebox (in-process)", "pulsebox (server)"):
        if name not in results:
            continue
        pulse = results[name]["median_ms"]
        for peer, target, _ in TARGETS:
            what = f"{name} <= {target:g} x {peer}"
            if peer not in results:
                verdicts.append((what, None, "skipped: " + reasons.get(peer, "")))
                continue
            ratio = pulse / results[peer]["median_ms"]
            verdicts.append((what, ratio, "met" if ratio <= target else "MISSED"))
    if rss:
        verdicts.append((f"supervisor RSS <= {RSS_TARGET_KIB} kB", rss,
                         "met" if rss <= RSS_TARGET_KIB else "MISSED"))
    for kind, value in (scale or {}).items():
        verdicts.append((f"{kind}: 100k files / empty <= {WORKSPACE_SCALE_TARGET}", value,
                         "met" if value <= WORKSPACE_SCALE_TARGET else "MISSED"))

    # Issue #24's targets, each in the regime(s) it names (the server's RSS
    # is #24.6).
    def verdict(what, value, met, missing):
        """`met(value)` decides; no value: skipped for the reason `missing`."""
        if value is None:
            verdicts.append((what, None, "skipped: " + missing))
        else:
            verdicts.append((what, value, "met" if met(value) else "MISSED"))

    def ratio_verdict(what, numerator, denominator, target, missing):
        ratio = None if numerator is None or not denominator else numerator / denominator
        verdict(what, ratio, lambda r: r <= target, missing)

    def why(*names):
        return "; ".join(f"{n}: {reasons[n]}" for n in names if n in reasons) or "not measured"

    regimes = (("interleaved, idle gaps", results), ("back to back", b2b))

    def median(table, name):
        return table.get(name, {}).get("median_ms")

    for regime, table in regimes:
        ratio_verdict(f"#24.1 in-process <= {IN_PROCESS_VS_BWRAP:.1f} x bwrap ({regime})",
                      median(table, "pulsebox (in-process)"), median(table, "bwrap"),
                      IN_PROCESS_VS_BWRAP, why("bwrap"))
    for regime, table in regimes:
        ratio_verdict(f"#24.2 served <= {SERVED_VS_BWRAP:.1f} x bwrap ({regime})",
                      median(table, "pulsebox (server)"), median(table, "bwrap"),
                      SERVED_VS_BWRAP, why("bwrap", "pulsebox (server)"))
    for regime, table in regimes:
        served = median(table, "pulsebox (server)")
        # The value: served median - floor median, in ms.
        verdict(f"#24.2 stretch served <= floor + {SERVED_OVER_FLOOR_MS:g} ms "
                f"({regime}; ms over floor)",
                None if served is None else served - median(table, "floor (/bin/true)"),
                lambda over: over <= SERVED_OVER_FLOOR_MS, why("pulsebox (server)"))
    n = THROUGHPUT_TARGET_CLIENTS
    verdict(f"#24.3 served runs/s >= {SERVED_RUNS_VS_BWRAP:.1f} x bwrap runs/s ({n} clients)",
            tput_vs_bwrap.get(n), lambda ratio: ratio >= SERVED_RUNS_VS_BWRAP,
            why("bwrap", "pulsebox (server)"))
    verdict(f"#24.6 server RSS (VmHWM, kB) <= {RSS_TARGET_KIB // 1024} MiB", server_rss or None,
            lambda kib: kib <= RSS_TARGET_KIB, why("pulsebox (server)"))

    width = max(len(what) for what, _, _ in verdicts)
    for what, value, verdict in verdicts:
        shown = "" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))
        log(f"   {what:<{width}} {shown:>10}  {verdict}")

    png = os.path.join(BENCH, "latency.png")
    problem = plot(results, png)
    log(f"== plot: {png}" if problem is None else f"== plot skipped: {problem}")
    with open(os.path.join(BENCH, "peers.json"), "w") as f:
        json.dump({"latency": results,
                   "latency_back_to_back": {"chunks": b2b_chunks, "runs_per_chunk": b2b_runs,
                                            "results": b2b},
                   "skipped": reasons, "cpus": cpus, "throughput_per_s": tput,
                   "cpu_ms_per_run": cpu_per_run,
                   "throughput_served_vs_bwrap": tput_vs_bwrap,
                   "supervisor_peak_rss_kib": rss, "server_peak_rss_kib": server_rss,
                   "workspace_100k_ratio": scale,
                   "targets": [{"target": w, "value": v, "verdict": d} for w, v, d in verdicts]},
                  f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
