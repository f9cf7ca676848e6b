#!/usr/bin/env python3
"""Speculative decoding on the trained copying pair (models/toolloop, docs/SPECTRAIN.md).

Replays the committed held-out tool-loop trace (models/toolloop/trace.json) turn by turn through
scripts/serve_bench.py's spec mode on three servers of the trained target: --spec none,
--spec ngram, and -md with the trained draft. Checked, on the greedy (temperature 0) turns:
  - every arm's answers are plain decoding's token for token (the q8_0 weights are repacked:
    exact to the bit, docs/SERVER.md "Speculative decoding");
  - the share of drafted tokens accepted is at least --min-ngram-share (prompt lookup) and
    --min-draft-share (the draft model), and the tokens that took no step of their own are at
    least --min-ngram-saved / --min-draft-saved of all completion tokens.
The thresholds sit well under what the committed pair measured (docs/SPECTRAIN.md).
Exit 0 when all hold, 1 otherwise (each failure printed).

  tests/serve/spec_toolloop.py --kamera build/bin/kamera
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = os.path.join(ROOT, 'models', 'toolloop')


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--kamera', required=True)
    p.add_argument('--reps', type=int, default=4)
    p.add_argument('--min-ngram-share', type=float, default=0.25)
    p.add_argument('--min-ngram-saved', type=float, default=0.15)
    p.add_argument('--min-draft-share', type=float, default=0.6)
    p.add_argument('--min-draft-saved', type=float, default=0.4)
    a = p.parse_args()
    serve = f"{a.kamera} serve -m {DIR}/target.gguf -t 1 --reuse prefix --port {{port}}"
    cmd = [sys.executable, os.path.join(ROOT, 'scripts', 'serve_bench.py'), '--server-cmd', serve,
           'spec', '--trace', f'{DIR}/trace.json', '--reps', str(a.reps), '--max-tokens', '160',
           '--arms', 'none', 'ngram', 'draft', '--draft', f'{DIR}/draft.gguf']
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    g = out['greedy']
    failures = []

    def check(ok, what):
        print(('ok   ' if ok else 'FAIL ') + what)
        if not ok:
            failures.append(what)

    check(g['greedy_tokens_equal'], 'greedy answers of none, ngram and draft are the same tokens')
    for arm, share, saved in (('ngram', a.min_ngram_share, a.min_ngram_saved),
                              ('draft', a.min_draft_share, a.min_draft_saved)):
        r = g[arm]
        acc = r['accepted'] / max(1, r['drafted'])
        check(acc >= share, f"{arm}: {r['accepted']} of {r['drafted']} drafted tokens accepted "
              f"({acc:.3f} >= {share})")
        frac = r['accepted'] / max(1, r['tokens'])
        check(frac >= saved, f"{arm}: {r['accepted']} of {r['tokens']} completion tokens took no "
              f"step of their own ({frac:.3f} >= {saved})")
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
