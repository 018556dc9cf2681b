#!/usr/bin/env python3
"""docs/embedding.md's C example is tests/install/capi_consumer.c's
program (after its opening comment), so the example in the docs compiles
and runs in tools/check's install check.

Usage: check_doc_example.py EMBEDDING_MD CONSUMER_C
"""
import re
import sys

doc = open(sys.argv[1], encoding="utf-8").read()
source = open(sys.argv[2], encoding="utf-8").read()
blocks = re.findall(r"```c\n(.*?)```", doc, flags=re.S)
program = re.sub(r"^/\*.*?\*/\n", "", source, count=1, flags=re.S)
if program not in blocks:
    print(f"{sys.argv[1]}: no ```c block equals {sys.argv[2]} (after its comment): "
          "copy the program into the docs", file=sys.stderr)
    sys.exit(1)
print("the C example in the docs is the installed consumer's program")
