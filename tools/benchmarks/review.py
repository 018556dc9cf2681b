#!/usr/bin/env python3
"""Reading a run's changes as lines: `pulsebox diff --stat` and `pulsebox
diff` of one transaction against `git diff --no-index --numstat` and `git
diff --no-index` of the same two trees, wall time and peak RSS, in one run.

The run (one real `pulsebox run`) adds FILES text files of LINES lines,
rewrites FILES files every line of which changes, and edits FILES files in
one line of ten. An added or rewritten file of a few thousand lines is what
a generated lock file, a vendored module or a formatter's pass leaves.
Usage: tools/benchmarks/review.py [--files 20] [--lines 8000] [--rounds 3]
       [--bin PULSEBOX] [--old OLD_PULSEBOX]   (both builds in the same rounds)

With --paths N it measures a transaction of many paths instead: one run adds
N one-line files (1,000 to a directory), and each review command that shows
them all (`changes --json`, `diff --json`, `diff --stat`, `diff`) is timed
with its peak RSS beside `diff --name-only`, which holds only the
transaction's description.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from commit_speed import BIN, env, rss_of  # noqa: E402

# Runs inside the sandbox, in the workspace.
CHANGE = r"""
import sys
files, lines = int(sys.argv[1]), int(sys.argv[2])
for i in range(files):
    with open("added/a%03d.txt" % i, "w") as f:
        f.write("".join("added %d line %d\n" % (i, n) for n in range(lines)))
    with open("rewritten/r%03d.txt" % i, "w") as f:
        f.write("".join("rewritten %d line %d\n" % (i, n) for n in range(lines)))
    with open("edited/e%03d.txt" % i, "w") as f:
        f.write("".join(("edited %d line %d\n" if n % 10 == 0 else "base %d line %d\n") % (i, n)
                        for n in range(lines)))
"""


def make_base(ws, files, lines):
    for directory in ("added", "rewritten", "edited"):
        os.makedirs(os.path.join(ws, directory))
    for i in range(files):
        for name in ("rewritten/r%03d.txt", "edited/e%03d.txt"):
            with open(os.path.join(ws, name % i), "w") as f:
                f.write("".join("base %d line %d\n" % (i, n) for n in range(lines)))


def one_round(base, binary, files, lines):
    """(stat ms, stat MB, patch ms, patch MB, git numstat ms, MB, git patch ms, MB)."""
    ws, state = os.path.join(base, "ws"), os.path.join(base, "state")
    os.chmod(base, 0o711)  # the sandbox's init must reach the state directory
    make_base(ws, files, lines)
    before = os.path.join(base, "before")
    shutil.copytree(ws, before, symlinks=True)
    rss_of([binary, "run", "--allow-weaker", "limits", "-w", ws, "--", "python3", "-c", CHANGE,
            str(files), str(lines)], env=env(state))
    stat_ms, stat_mb, stat_out, _ = rss_of([binary, "diff", "-w", ws, "--stat"], env=env(state))
    patch_ms, patch_mb, patch_out, _ = rss_of([binary, "diff", "-w", ws], env=env(state))
    # git sees the same two trees: the base, and the base with the run's changes.
    after = os.path.join(base, "after")
    shutil.copytree(before, after, symlinks=True)
    subprocess.run(["python3", "-c", CHANGE, str(files), str(lines)], cwd=after, check=True)
    git = ["git", "-c", "core.quotepath=off", "diff", "--no-index", "--no-renames"]
    git_stat_ms, git_stat_mb, git_stat_out, _ = rss_git(git + ["--numstat", before, after])
    git_patch_ms, git_patch_mb, _, _ = rss_git(git + [before, after])
    # The same counts as git's, or the comparison is of different work.
    ours = sum(int(added) + int(removed)
               for added, removed in re.findall(r"\| \+(\d+) -(\d+)$", stat_out, re.M))
    theirs = sum(int(word) for line in git_stat_out.splitlines() for word in line.split()[:2]
                 if word.isdigit())
    if ours != theirs:
        sys.exit(f"pulsebox counted {ours} changed lines, git {theirs}:\n{stat_out[:2000]}")
    if patch_out.count("\n+") < files * lines:
        sys.exit("pulsebox diff showed fewer added lines than the run made")
    return stat_ms, stat_mb, patch_ms, patch_mb, git_stat_ms, git_stat_mb, git_patch_ms, git_patch_mb


def rss_git(argv):
    """rss_of for git diff, whose exit status 1 means "the trees differ"."""
    wrapped = ["sh", "-c", '"$@"; status=$?; [ $status -le 1 ]', "sh"] + argv
    return rss_of(wrapped)


MANY = r"""
import os, sys
paths = int(sys.argv[1])
for i in range(paths):
    if i % 1000 == 0:
        os.makedirs("gen/d%04d" % (i // 1000))
    with open("gen/d%04d/f%04d.txt" % (i // 1000, i % 1000), "w") as f:
        f.write("line %d\n" % i)
"""

REVIEWS = [["changes", "--json"], ["diff", "--json"], ["diff", "--stat"], ["diff"],
           ["diff", "--name-only"]]


def many_paths(args, builds):
    base = tempfile.mkdtemp(prefix="pb-review-many-")
    try:
        ws, state = os.path.join(base, "ws"), os.path.join(base, "state")
        os.chmod(base, 0o711)
        os.makedirs(ws)
        rss_of([builds[-1][1], "run", "--allow-weaker", "limits", "-w", ws, "--", "python3", "-c",
                MANY, str(args.paths)], env=env(state))
        print(f"== reviewing a transaction of {args.paths} added files (ms; peak RSS MB; "
              f"medians of {args.rounds})")
        rows = {(name, i): [] for name, _ in builds for i in range(len(REVIEWS))}
        for round_number in range(args.rounds):
            for name, binary in (builds if round_number % 2 == 0 else builds[::-1]):
                for i, review in enumerate(REVIEWS):
                    ms, mb, out, _ = rss_of([binary] + review[:1] + ["-w", ws] + review[1:],
                                            env=env(state))
                    if len(out) < args.paths * 10:
                        sys.exit(f"{' '.join(review)} printed {len(out)} bytes")
                    rows[(name, i)].append((ms, mb))
        print(f"{'command':<20} " + " ".join(f"{(name + ' ms').strip():>8} {(name + ' MB').strip():>8}"
                                              for name, _ in builds))
        for i, review in enumerate(REVIEWS):
            cells = []
            for name, _ in builds:
                ms = statistics.median(ms for ms, _ in rows[(name, i)])
                mb = statistics.median(mb for _, mb in rows[(name, i)])
                cells.append(f"{ms:>8.0f} {mb:>8.1f}")
            print(f"{' '.join(review):<20} " + " ".join(cells), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--lines", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bin", default=BIN)
    parser.add_argument("--old", default=None, help="an older pulsebox binary, in the same rounds")
    parser.add_argument("--paths", type=int, default=0,
                        help="measure a transaction of this many paths instead")
    args = parser.parse_args()
    builds = [("old", os.path.abspath(args.old))] if args.old else []
    builds.append(("new" if args.old else "", os.path.abspath(args.bin)))
    if args.paths:
        many_paths(args, builds)
        return
    print(f"== reading changes as lines: {args.files} files added, {args.files} rewritten, "
          f"{args.files} edited, {args.lines} lines each (ms; peak RSS MB)")
    print(f"{'build':>5} {'stat':>8} {'git':>8} {'ratio':>6} {'patch':>8} {'git':>8} {'ratio':>6} "
          f"{'stat RSS':>9} {'patch RSS':>10} {'git RSS':>8}")
    rows = {name: [] for name, _ in builds}
    for round_number in range(args.rounds):
        for name, binary in (builds if round_number % 2 == 0 else builds[::-1]):
            base = tempfile.mkdtemp(prefix="pb-review-")
            try:
                rows[name].append(one_round(base, binary, args.files, args.lines))
            finally:
                shutil.rmtree(base, ignore_errors=True)
    for name, _ in builds:
        stat, stat_mb, patch, patch_mb, git_stat, git_stat_mb, git_patch, git_patch_mb = (
            statistics.median(column) for column in zip(*rows[name]))
        print(f"{name:>5} {stat:>8.0f} {git_stat:>8.0f} {stat / git_stat:>6.2f} {patch:>8.0f} "
              f"{git_patch:>8.0f} {patch / git_patch:>6.2f} {stat_mb:>9.1f} {patch_mb:>10.1f} "
              f"{max(git_stat_mb, git_patch_mb):>8.1f}", flush=True)


if __name__ == "__main__":
    main()
