#!/usr/bin/env python3
"""Compare `kamera tokenize` with llama.cpp's `llama-tokenize` on the tokenizer corpus.

    python3 scripts/compare-llama-tokenize.py LLAMA_TOKENIZE KAMERA FILE.gguf [--limit N]

Runs both CLIs on every string of tests/data/tokenizer/corpus.json (strings with a NUL byte are
skipped: they cannot be passed as an argument), with and without special-token parsing, without
BOS, and prints each string whose ids differ and a count per mode. One process per string and
tool, so a full run takes a few minutes per vocabulary. docs/TOKENIZERS.md lists the differences
found and their causes."""
import json
import os
import subprocess
import sys


def ids(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    return json.loads(out.splitlines()[-1]) if out else []


def main():
    lt, kamera, gguf = sys.argv[1:4]
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    corpus = json.load(open(os.path.join(root, "tests/data/tokenizer/corpus.json")))["strings"]
    corpus = [s for s in corpus if "\0" not in s][:limit]
    for special in (True, False):
        differ = 0
        for s in corpus:
            a = ids([lt, "-m", gguf, "-p", s, "--ids", "--no-bos", "--no-escape", "--log-disable"]
                    + ([] if special else ["--no-parse-special"]))
            b = ids([kamera, "tokenize", "-m", gguf, "-p", s, "--ids", "--no-bos"]
                    + ([] if special else ["--no-special"]))
            if a != b:
                differ += 1
                print(f"{json.dumps(s, ensure_ascii=False)}\n  llama.cpp {a}\n  kamera    {b}")
        mode = "special on" if special else "special off"
        print(f"{os.path.basename(gguf)} ({mode}): {differ} of {len(corpus)} strings differ")


if __name__ == "__main__":
    main()
