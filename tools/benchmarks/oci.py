#!/usr/bin/env python3
"""pulsebox-runc beside runc and crun, driven as engines drive them (tools/bench oci).

Three groups, each timing /bin/true from start to exit, all interleaved in one
run (tools/benchmarks/peers.py's harness: posix_spawn -> wait4, each round in a
new order) so every runtime sees the same machine state:
  1. podman run --rm --network none IMG /bin/true, --runtime pulsebox-runc,
     runc and crun;
  2. ctr run --rm --runc-binary pulsebox-runc / runc IMG ID /bin/true;
  3. a bare bundle: pulsebox-runc run, runc run, crun run.
Prints the versions, the medians and each runtime's time as a multiple of
pulsebox-runc's. A runtime that cannot run here is skipped with the reason.

Root only. Nothing reaches the host's engine state or network: podman's
storage, run root and tmpdir are in a temporary directory and every podman
command runs in a private mount namespace with --network none (its default
network would add a bridge, iptables chains and ip_forward); containerd is
started here with its root, state and sockets in the temporary directory, no
CRI plugin, in a private mount namespace, and stopped by pid at the end; the
shim's entries under /run/containerd that this run made are removed; the
cgroup parents the runtimes made for this run's cgroupsPaths are removed.
ip_forward, the links and the iptables rules are compared before and after.
Usage: tools/benchmarks/oci.py [--rounds N]
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

RUNC_NAME = os.path.join(peers.ROOT, "build", "src", "cli", "pulsebox-runc")
SHIM_ROOT = "/run/containerd"
CGROUP_ROOT = "/sys/fs/cgroup"


def version(argv):
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"({error})"
    return out.strip().splitlines()[0] if out.strip() else "(no output)"


def host_network():
    """What an engine could change on the host's network."""
    with open("/proc/sys/net/ipv4/ip_forward") as f:
        forward = f.read().strip()
    rules = ""
    if peers.which("iptables"):
        rules = subprocess.run(["iptables", "-S"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True).stdout
    return forward, sorted(os.listdir("/sys/class/net")), rules


def remove_cgroup_parent(name):
    """rmdir of the parent the runtimes made for /<name>/<id> (leaves are theirs)."""
    for hierarchy in os.listdir(CGROUP_ROOT):
        path = os.path.join(CGROUP_ROOT, hierarchy, name)
        if os.path.isdir(path) and not os.path.islink(os.path.join(CGROUP_ROOT, hierarchy)):
            try:
                os.rmdir(path)
            except OSError as error:
                peers.log(f"  left {path}: {error}")
    if os.path.isdir(os.path.join(CGROUP_ROOT, name)):
        os.rmdir(os.path.join(CGROUP_ROOT, name))


def image_layout_tar(rootfs, work):
    """An OCI image layout tar of `rootfs` (one uncompressed layer); its manifest digest."""
    layout = os.path.join(work, "layout")
    blobs = os.path.join(layout, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)

    def blob(data, media_type):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, digest), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": "sha256:" + digest, "size": len(data)}

    layer = subprocess.run(["tar", "-C", rootfs, "-cf", "-", "."], check=True,
                           stdout=subprocess.PIPE).stdout
    layer_desc = blob(layer, "application/vnd.oci.image.layer.v1.tar")
    config = {"architecture": "amd64", "os": "linux", "config": {"Env": ["PATH=/bin"]},
              "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]}}
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": blob(json.dumps(config).encode(),
                               "application/vnd.oci.image.config.v1+json"),
                "layers": [layer_desc]}
    manifest_desc = blob(json.dumps(manifest).encode(),
                         "application/vnd.oci.image.manifest.v1+json")
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [manifest_desc]}, f)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    tar = os.path.join(work, "image.tar")
    subprocess.run(["tar", "-C", layout, "-cf", tar, "oci-layout", "index.json", "blobs"],
                   check=True)
    return tar, manifest_desc["digest"]


class Containerd:
    """A containerd of this run's own (see the module docstring)."""

    def __init__(self, work, namespace):
        self.work, self.namespace = work, namespace
        self.made = [p for p in (SHIM_ROOT, f"{SHIM_ROOT}/fifo", f"{SHIM_ROOT}/s",
                                 f"{SHIM_ROOT}/runc", f"{SHIM_ROOT}/runc/{namespace}")
                     if not os.path.exists(p)]
        self.before = {d: set(os.listdir(d)) if os.path.isdir(d) else set()
                       for d in (f"{SHIM_ROOT}/fifo", f"{SHIM_ROOT}/s")}
        self.socket = os.path.join(work, "containerd.sock")
        config = os.path.join(work, "config.toml")
        with open(config, "w") as f:
            f.write(f'version = 2\nroot = "{work}/root"\nstate = "{work}/state"\n'
                    'disabled_plugins = ["io.containerd.grpc.v1.cri", '
                    '"io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
                    '"io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", '
                    '"io.containerd.tracing.processor.v1.otlp", '
                    '"io.containerd.internal.v1.tracing"]\n'
                    f'[grpc]\n  address = "{self.socket}"\n'
                    f'[ttrpc]\n  address = "{self.socket}.ttrpc"\n'
                    '[debug]\n  address = ""\n'
                    f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{work}/opt"\n')
        self.log = open(os.path.join(work, "containerd.log"), "w")
        # unshare execs containerd in place: the pid is the daemon's.
        self.process = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "containerd", "--config", config],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.path.exists(self.socket) and self.ctr(["version"]).returncode == 0:
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("containerd did not start; see its log in " + work)

    def base(self):
        return [peers.which("ctr"), "-n", self.namespace, "--address", self.socket]

    def ctr(self, args):
        return subprocess.run(self.base() + args, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=120)

    def stop(self):
        if self.process.poll() is None:
            for task in self.ctr(["task", "ls", "-q"]).stdout.split():
                self.ctr(["task", "kill", "-s", "9", task])
                self.ctr(["task", "delete", "--force", task])
            for container in self.ctr(["containers", "ls", "-q"]).stdout.split():
                self.ctr(["containers", "rm", container])
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(f"{SHIM_ROOT}/runc/{self.namespace}", ignore_errors=True)
        for directory, before in self.before.items():
            if os.path.isdir(directory):
                for name in set(os.listdir(directory)) - before:
                    path = os.path.join(directory, name)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        os.unlink(path)
        for path in reversed(self.made):
            if not os.path.exists(path):
                continue
            try:
                os.rmdir(path)
            except OSError as error:
                peers.log(f"  left {path}: {error}")
        remove_cgroup_parent(self.namespace)


def probe(peer, reasons):
    """One untimed run; a failure skips the peer with its reason."""
    try:
        peer.once()
        peer.samples.clear()
        return True
    except RuntimeError as error:
        reasons[peer.name] = str(error)
        return False


def bare_peers(work, rootfs, name, reasons):
    """`RUNTIME run` of a bundle (runc spec's config, read-only root, /bin/true)."""
    runc = peers.which("runc")
    result = []
    helper = None
    for label, binary in (("pulsebox-runc", RUNC_NAME), ("runc", runc), ("crun", peers.which("crun"))):
        if not binary:
            reasons[f"bare {label}"] = f"{label} is not installed"
            continue
        bundle = peers.oci_bundle(runc, os.path.join(work, f"bundle-{label}"), rootfs)
        config = os.path.join(bundle, "config.json")
        with open(config) as f:
            spec = json.load(f)
        # runc spec asks for ambient capabilities that are not inheritable:
        # runc only warns, pulsebox-runc refuses (capset EPERM). None here, for all.
        spec["process"]["capabilities"].pop("ambient", None)
        spec["linux"]["cgroupsPath"] = f"/{name}/{label}"
        with open(config, "w") as f:
            json.dump(spec, f)
        state = os.path.join(work, f"state-{label}")
        os.makedirs(state, mode=0o700, exist_ok=True)
        prefix = []
        if label == "crun":
            helper, prefix = peers.hidden_unified_namespace()
        peer = peers.Peer(f"bare {label}", prefix + [binary, "--root", state, "run", "--bundle",
                                                     bundle, f"{name}-{label}"])
        peer.group, peer.runtime = "bare bundle run", label
        if probe(peer, reasons):
            result.append(peer)
    return result, helper


def podman_peers(work, rootfs, reasons):
    podman = peers.which("podman")
    if not podman:
        reasons["podman"] = "podman is not installed"
        return [], None
    conf = os.path.join(work, "containers.conf")
    with open(conf, "w") as f:
        # root lacks CAP_SYS_RESOURCE here: podman's default ulimits would fail.
        f.write('[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
                '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n')
    env = dict(os.environ, CONTAINERS_CONF=conf)
    base = [peers.which("unshare"), "-m", "--propagation", "private", podman,
            "--root", os.path.join(work, "podman", "root"),
            "--runroot", os.path.join(work, "podman", "run"),
            "--tmpdir", os.path.join(work, "podman", "tmp"), "--storage-driver", "overlay"]
    tarball = os.path.join(work, "rootfs.tar")
    subprocess.run(["tar", "-C", rootfs, "-cf", tarball, "."], check=True)
    image = "localhost/pulsebox-bench-oci:latest"
    imported = subprocess.run(base + ["import", tarball, image], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if imported.returncode != 0:
        reasons["podman"] = "podman import failed: " + imported.stderr.strip()[-300:]
        return [], None
    result = []
    for label, binary in (("pulsebox-runc", RUNC_NAME), ("runc", peers.which("runc")),
                          ("crun", peers.which("crun"))):
        if not binary:
            reasons[f"podman {label}"] = f"{label} is not installed"
            continue
        peer = peers.Peer(f"podman {label}", base + ["--runtime", binary, "run", "--rm",
                                                     "--network", "none", image, "/bin/true"],
                          env=env)
        peer.group, peer.runtime = "podman run --rm", label
        if probe(peer, reasons):
            result.append(peer)
        elif label == "crun" and os.path.ismount("/sys/fs/cgroup/unified"):
            reasons[peer.name] = ("crun 1.8 refuses this hybrid host's cgroups (bare crun runs "
                                  "through peers.py's nsenter trick; podman cannot pass it on)")

    def cleanup():
        subprocess.run(base + ["rm", "--all", "--force"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        subprocess.run(base + ["image", "rm", "--all", "--force"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return result, cleanup


def ctr_peers(work, rootfs, name, reasons):
    for tool in ("containerd", "ctr", "containerd-shim-runc-v2"):
        if not peers.which(tool):
            reasons["ctr"] = f"{tool} is not installed"
            return [], None
    os.makedirs(os.path.join(work, "containerd"))
    tar, digest = image_layout_tar(rootfs, work)
    try:
        containerd = Containerd(os.path.join(work, "containerd"), name)
    except RuntimeError as error:
        reasons["ctr"] = str(error)
        return [], None
    imported = containerd.ctr(["images", "import", "--base-name", "localhost/bb", "--digests", tar])
    if imported.returncode != 0:
        reasons["ctr"] = "ctr images import failed: " + imported.stdout.strip()[-300:]
        return [], containerd
    image = "localhost/bb@" + digest
    result = []
    for label, binary in (("pulsebox-runc", RUNC_NAME), ("runc", peers.which("runc"))):
        if not binary:
            reasons[f"ctr {label}"] = f"{label} is not installed"
            continue
        peer = peers.Peer(f"ctr {label}", containerd.base() + [
            "run", "--rm", "--runc-binary", binary, image, f"b-{label}", "/bin/true"])
        peer.group, peer.runtime = "ctr run --rm", label
        if probe(peer, reasons):
            result.append(peer)
    return result, containerd


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench oci: needs root (containerd, podman with cgroupfs, runc and crun)")
    if not os.access(RUNC_NAME, os.X_OK):
        sys.exit(f"bench oci: {RUNC_NAME} is missing; build it first (meson compile -C build)")
    name = f"pulsebox-bench-oci-{os.getpid()}"
    network_before = host_network()
    work = tempfile.mkdtemp(prefix=name + "-")
    os.chmod(work, 0o700)
    rootfs = peers.busybox_rootfs(os.path.join(work, "rootfs"))
    reasons = {}
    helper = podman_cleanup = containerd = None
    try:
        peers.log("versions:")
        for argv in ([RUNC_NAME, "--version"], ["runc", "--version"], ["crun", "--version"],
                     ["podman", "--version"], ["conmon", "--version"],
                     ["containerd", "--version"]):
            if peers.which(argv[0]) or os.path.isabs(argv[0]):
                peers.log(f"  {version(argv)}")
        bare, helper = bare_peers(work, rootfs, name, reasons)
        podman, podman_cleanup = podman_peers(work, rootfs, reasons)
        ctr, containerd = ctr_peers(work, rootfs, name, reasons)
        runs = podman + ctr + bare
        peers.log(f"{len(runs)} runtimes x {args.rounds} interleaved rounds ...")
        peers.measure(runs, args.rounds)

        peers.log(f"\n{'':<18} {'runtime':<14} {'median':>10} {'p95':>10}  {'/ pulsebox-runc':>15}")
        for group in ("podman run --rm", "ctr run --rm", "bare bundle run"):
            members = [p for p in runs if p.group == group]
            ours = next((p for p in members if p.runtime == "pulsebox-runc"), None)
            for peer in members:
                median = statistics.median(peer.samples)
                ratio = (f"{median / statistics.median(ours.samples):>14.2f}x"
                         if ours and peer is not ours else f"{'':>15}")
                peers.log(f"{group:<18} {peer.runtime:<14} {median:>7.1f} ms "
                          f"{peers.percentile(peer.samples, 0.95):>7.1f} ms  {ratio}")
        for what, why in reasons.items():
            peers.log(f"skipped {what}: {why}")
    finally:
        if containerd:
            containerd.stop()
        if podman_cleanup:
            podman_cleanup()
        if helper:
            helper.kill()
            helper.wait()
        remove_cgroup_parent(name)
        shutil.rmtree(work, ignore_errors=True)
    if host_network() != network_before:
        sys.exit("bench oci: the host's ip_forward, links or iptables rules changed during the run")


if __name__ == "__main__":
    main()
