#!/usr/bin/env python3
"""The remote backend over loopback (tools/bench remote).

A `pulsebox serve --listen 127.0.0.1:PORT` with a state directory of its own
plays the remote machine. Measured in one run, side by side:
  1. latency of `true`: `pulsebox run` in-process, and `pulsebox run` with
     PULSE_REMOTE_URL (hash the workspace, ask the server, run, bring home)
  2. runs per second of `true` with 1, 4 and 16 HTTP clients posting runs
     of an uploaded workspace (the server's side alone)
  3. a 100 MB workspace (1000 files of 100 KB): the first remote run (the
     workspace is sent) and the second (the server has it)
Usage: tools/benchmarks/remote.py [--runs N] [--quick]
"""
import argparse
import http.client
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.path.join(ROOT, "build", "src", "cli", "pulsebox")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(argv, env):
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        sys.exit(f"remote bench: {' '.join(argv)} failed: {done.stderr.decode()[-400:]}")
    return elapsed


def post_runs(port, token, upload, total, clients):
    body = json.dumps({"v": 1, "argv": ["true"], "workspace_upload": upload,
                       "allow_weaker": ["limits"], "changes": "discard"})
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    counter = iter(range(total))
    lock = threading.Lock()
    failures = []

    def worker():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            connection.request("POST", "/v1/runs", body, headers)
            answer = connection.getresponse().read().decode()
            if '"event":"result"' not in answer:
                failures.append(answer[-300:])

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if failures:
        sys.exit(f"remote bench: {len(failures)} runs failed: {failures[0]}")
    return total / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 10 if args.quick else args.runs
    scratch = tempfile.mkdtemp(prefix="pulsebox-remote-bench-")
    os.chmod(scratch, 0o711)
    token = secrets.token_hex(32)
    token_file = os.path.join(scratch, "token")
    with open(token_file, "w") as f:
        f.write(token)
    os.chmod(token_file, 0o600)
    port = free_port()
    server_env = dict(os.environ, PULSEBOX_STATE_DIR=os.path.join(scratch, "server-state"))
    server = subprocess.Popen([CLI, "serve", "--listen", f"127.0.0.1:{port}", "--token-file",
                               token_file], env=server_env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        small = os.path.join(scratch, "small")
        os.mkdir(small)
        with open(os.path.join(small, "a.txt"), "w") as f:
            f.write("a\n")
        local_env = dict(os.environ, PULSEBOX_STATE_DIR=os.path.join(scratch, "client-state"),
                         PULSEBOX_SERVER="off", NO_COLOR="1")
        remote_env = dict(local_env, PULSE_REMOTE_URL=f"http://127.0.0.1:{port}",
                          PULSE_REMOTE_TOKEN=token)
        base = [CLI, "run", "--allow-weaker", "limits", "--changes", "discard", "-w", small, "--"]
        timed(base + ["true"], remote_env)  # uploads the small workspace once
        local, remote = [], []
        for _ in range(runs):  # interleaved: the machine's drift touches both
            local.append(timed(base + ["true"], local_env))
            remote.append(timed(base + ["true"], remote_env))
        print("== remote: latency of `true` (medians of %d, interleaved)" % runs)
        print(f"  pulsebox run, in-process       {statistics.median(local):8.2f} ms")
        print(f"  pulsebox run, remote (loopback) {statistics.median(remote):7.2f} ms"
              f"   ({statistics.median(remote) / statistics.median(local):.2f} x in-process)")

        upload = None
        out = subprocess.run(base[:-1] + ["--json", "--", "true"], env=remote_env,
                             capture_output=True, text=True)
        upload = json.loads(out.stdout)["remote"]["workspace_upload"]
        total = 40 if args.quick else 200
        print(f"== remote: runs per second of `true` over HTTP ({total} runs each)")
        for clients in (1, 4, 16):
            print(f"  {clients:2d} clients  {post_runs(port, token, upload, total, clients):7.1f} runs/s")

        big = os.path.join(scratch, "big")
        os.mkdir(big)
        for i in range(1000):
            with open(os.path.join(big, f"f{i:04d}.bin"), "wb") as f:
                f.write(os.urandom(100 * 1024))
        big_run = [CLI, "run", "--allow-weaker", "limits", "--changes", "discard", "-w", big,
                   "--", "true"]
        first = timed(big_run, remote_env)
        second = timed(big_run, remote_env)
        print("== remote: a 100 MB workspace (1000 files of 100 KB)")
        print(f"  first run (the workspace is sent)      {first:8.1f} ms")
        print(f"  second run (the server has it)         {second:8.1f} ms")
    finally:
        server.terminate()
        server.wait(timeout=60)
        subprocess.run(["rm", "-rf", scratch])


if __name__ == "__main__":
    main()
