#!/usr/bin/env python3
"""Prints the build outputs the tests of one meson suite need, one per line,
relative to the build directory (for `ninja -C BUILD $(...)`).

    tools/suite_outputs.py BUILD SUITE

tools/check builds only these in its sanitizer tree, which runs the unit
suite alone: the integration suites' binaries there were most of that
tree's build and never ran.
"""
import json
import os
import subprocess
import sys


def introspect(build, what):
    out = subprocess.run(["meson", "introspect", build, what], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build, suite = sys.argv[1], sys.argv[2]
    targets = {t["id"]: t["filename"] for t in introspect(build, "--targets")}
    root = os.path.realpath(build)
    built = {os.path.realpath(f) for files in targets.values() for f in files}
    wanted = set()
    tests = [t for t in introspect(build, "--tests")
             if any(s == suite or s.endswith(":" + suite) for s in t["suite"])]
    if not tests:
        sys.exit(f"suite_outputs: no test of suite {suite!r} in {build}")
    for test in tests:
        for dep in test.get("depends", []):
            if dep not in targets:
                sys.exit(f"suite_outputs: test {test['name']} depends on unknown target {dep}")
            wanted.update(os.path.realpath(f) for f in targets[dep])
        # The program and its arguments, where they name a built target
        # (a test that inspects a library it does not declare in `depends`).
        for word in test["cmd"]:
            path = os.path.realpath(word) if os.path.isabs(word) else None
            if path in built:
                wanted.add(path)
    for path in sorted(wanted):
        print(os.path.relpath(path, root))


if __name__ == "__main__":
    main()
