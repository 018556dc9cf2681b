#!/usr/bin/python3
"""Validates protocol messages against docs/schema/ (JSON Schema 2020-12).

    validate_messages.py SCHEMA_DIR KIND < messages

KIND is event, request, reply or result: the schema every line of stdin
(one JSON object each) must match. Exits 0 when all do, 1 naming each line
that does not and why, 2 on bad usage. Debian's python3-jsonschema.
"""
import json
import pathlib
import sys

import jsonschema


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[2] not in ("event", "request", "reply", "result"):
        print(__doc__, file=sys.stderr)
        return 2
    schemas = {}
    for path in pathlib.Path(sys.argv[1]).glob("*.schema.json"):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        schemas[schema["$id"]] = schema
    target = schemas["urn:pulsebox:protocol:1:" + sys.argv[2]]
    resolver = jsonschema.RefResolver.from_schema(target, store=schemas)
    validator = jsonschema.Draft202012Validator(target, resolver=resolver)
    failures = 0
    count = 0
    for number, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        count += 1
        try:
            message = json.loads(line)
        except json.JSONDecodeError as error:
            print(f"line {number}: not JSON: {error}: {line[:200]!r}")
            failures += 1
            continue
        errors = sorted(validator.iter_errors(message), key=lambda e: list(e.path))
        if errors:
            failures += 1
            best = jsonschema.exceptions.best_match(errors)
            print(f"line {number}: {best.message} at {list(best.absolute_path)}: {line[:300]!r}")
    if count == 0:
        print("no messages to validate")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
