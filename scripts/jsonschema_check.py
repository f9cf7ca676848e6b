#!/usr/bin/env python3
"""Validates documents against JSON Schemas with an independent validator (Debian's
python3-jsonschema), for the grammar tests (tests/unit/grammar/).

  jsonschema_check.py IN.json OUT.json

IN: [{"schema": {...}, "docs": ["<document text>", ...]}, ...]. Each document is parsed with
Python's json module (a text that does not parse is invalid) and validated with the validator
class the schema's $schema names (Draft 2020-12 when it names none). OUT: [[true|false, ...], ...],
one verdict per document. Exit status 3 when jsonschema is not installed (the tests then skip).
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("jsonschema_check: python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(3)


def verdict(validator, text):
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return validator.is_valid(doc)


def main():
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    out = []
    for case in cases:
        schema = case["schema"]
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema)
        out.append([verdict(validator, d) for d in case["docs"]])
    json.dump(out, open(sys.argv[2], "w", encoding="utf-8"))


if __name__ == "__main__":
    main()
