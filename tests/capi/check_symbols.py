#!/usr/bin/env python3
"""The C symbols libpulsebox.so exports are exactly the functions
include/pulsebox/pulsebox.h declares, the library's soname is
libpulsebox.so.0, and nothing of the libcrypto linked into it leaves.

Usage: check_symbols.py LIBRARY HEADER
"""
import re
import subprocess
import sys

LIBCRYPTO = re.compile(r"^(SHA[0-9]|EVP_|HMAC|OPENSSL_|OSSL_|CRYPTO_|ossl_|BN_|RAND_|ERR_)")


def declared(header):
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # A declaration's name is an identifier directly followed by "(";
    # a callback typedef's is "(*name)(", which this leaves out.
    return set(re.findall(r"\b(pulsebox_\w+)\s*\(", text))


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True,
                         capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[1] == "A":  # "A": the version node itself
            continue
        names.add(fields[2].split("@")[0])
    return names


def soname(library):
    out = subprocess.run(["readelf", "-d", library], check=True, capture_output=True,
                         text=True).stdout
    found = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return found.group(1) if found else None


def main():
    library, header = sys.argv[1], sys.argv[2]
    problems = []
    api = declared(header)
    symbols = exported(library)
    c_symbols = {name for name in symbols if not name.startswith("_Z")}
    for name in sorted(api - c_symbols):
        problems.append(f"{name}: declared in {header} but not exported")
    for name in sorted(c_symbols - api):
        problems.append(f"{name}: exported but not declared in {header}")
    for name in sorted(symbols):
        if LIBCRYPTO.match(name):
            problems.append(f"{name}: a libcrypto symbol is exported")
    if not any(name.startswith("_ZN8pulsebox7SandboxC") for name in symbols):
        problems.append("pulsebox::Sandbox (the C++ API) is not exported")
    if soname(library) != "libpulsebox.so.0":
        problems.append(f"soname is {soname(library)}, expected libpulsebox.so.0")
    for problem in problems:
        print(f"check_symbols: {library}: {problem}", file=sys.stderr)
    if not problems:
        print(f"check_symbols: {len(api)} C functions and {len(symbols - c_symbols)} "
              "C++ symbols exported, nothing else")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
