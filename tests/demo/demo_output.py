#!/usr/bin/env python3
"""`make demo`'s output (scripts/demo.sh), run once per agent client (the openai npm client where
Node has it, then plain curl): every agent turn names its usage.prompt_tokens_details.cached_tokens,
and the numbers hold what the demo claims.

Per turn: the printed cached_tokens and prompt tokens are the server's (the turn records the demo
keeps, agent-turns.jsonl); the first turn, on a cold server, reuses nothing; every later turn has
the survivors of the window served from the cache (at least 4 tokens for each of the other 5
frames); the reference (the same request with "reuse": "reprefill") reuses nothing. Over the run
the agent recomputes less than half of the prompt tokens, answers within a point of the
re-prefill, and the web page step shows a PNG of the page (its size as printed) or says why not.
When it ends, neither of its servers answers any more.

  tests/demo/demo_output.py --kamera build/bin/kamera [--npm build/npm]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TURN = re.compile(r'^turn +(\d+)  frames ([\d ]+?)(  \(frame (\d+) looked back at\))?  "(.*)"  answer (\S+) '
                  r'\(gold (\S+), re-prefill (\S+)\)\n {9}cached_tokens (\d+) of (\d+) \(re-prefill (\d+)\), '
                  r'recomputed (\d+); frames from: (.*); TTFT ([\d.]+) ms vs ([\d.]+) ms re-prefill$', re.M)


def run_demo(kamera, npm, client):
    tmp = tempfile.mkdtemp(prefix='kamera-demo-test-')
    os.symlink(os.path.dirname(os.path.abspath(kamera)), os.path.join(tmp, 'bin'))
    if npm and os.path.isdir(npm):
        os.symlink(os.path.abspath(npm), os.path.join(tmp, 'npm'))
    env = dict(os.environ, KAMERA_DEMO_CLIENT=client)
    run = subprocess.run(['bash', os.path.join(ROOT, 'scripts', 'demo.sh'), tmp], capture_output=True,
                         text=True, env=env, timeout=300)
    return tmp, run


def answers(url):
    """Whether a server answers at url (/health within a second)."""
    try:
        with urllib.request.urlopen(url + '/health', timeout=1):
            return True
    except OSError:
        return False


def check(kamera, npm, client):
    """The failures of one run of the demo (empty: it passed)."""
    tmp, run = run_demo(kamera, npm, client)
    out, bad = run.stdout, []
    expect = lambda ok, what: ok or bad.append(f'{client}: {what}')
    try:
        expect(run.returncode == 0, f'demo.sh exited {run.returncode}: {run.stderr[-2000:]}')
        for n in range(1, 5):
            expect(f'\n== {n}. ' in out, f'step {n} is printed')
        turns = TURN.findall(out)
        records = []
        path = os.path.join(tmp, 'demo', 'agent-turns.jsonl')
        if os.path.exists(path):
            records = [json.loads(line) for line in open(path)]
        expect(len(turns) == 19 and len(records) == 19,
               f'19 agent turns printed and recorded ({len(turns)}, {len(records)})')
        if bad:
            return bad + [f'{client}: output:\n{out}']
        prompt = recomputed = right = ref_right = 0
        for i, (t, r) in enumerate(zip(turns, records)):
            cached, total, ref_cached = int(t[8]), int(t[9]), int(t[10])
            u = r['usage']
            expect(cached == u['prompt_tokens_details']['cached_tokens'] and total == u['prompt_tokens'],
                   f'turn {i + 1} prints the server\'s cached_tokens ({cached} of {total} vs {u})')
            expect(ref_cached == 0, f'turn {i + 1}: the re-prefill reuses nothing ({ref_cached})')
            if i == 0:
                expect(cached == 0, f'turn 1 on a cold server reuses nothing ({cached})')
            else:
                expect(cached >= 4 * 5, f'turn {i + 1}: the 5 other frames are served from the cache ({cached})')
            if t[3]:
                expect(t[3] == t[1].split()[0], f'turn {i + 1} looks back at frame {t[3]} first ({t[1]})')
            prompt += total
            recomputed += total - cached
            right += t[5] == t[6]
            ref_right += t[7] == t[6]
        expect(sum(1 for t in turns if t[3]) == 4, 'four look-back turns')
        expect(2 * recomputed < prompt, f'the agent recomputes less than half of its prompts ({recomputed} of {prompt})')
        expect(right >= ref_right - 1, f'answers within a point of the re-prefill ({right} vs {ref_right} of 19)')
        expect(f'agent: 19 turns, {prompt - recomputed} of {prompt} prompt tokens served' in out,
               'the summary adds the turns up')
        png = os.path.join(tmp, 'demo', 'web-page.png')
        if os.path.exists(png):
            head = open(png, 'rb').read(24)
            w, h = int.from_bytes(head[16:20], 'big'), int.from_bytes(head[20:24], 'big')
            expect(head[:8] == b'\x89PNG\r\n\x1a\n' and f'web-page.png ({w} x {h} pixels' in out,
                   f'the page\'s PNG is one, of the size printed ({w} x {h})')
        else:
            expect('No picture of the page: chromium is not installed' in out,
                   'without a PNG the page step says why')
        expect(re.search(r'^all +19 ', out, re.M) is not None, 'the engine-level table has its 19 questions')
        servers = re.findall(r' at (http://127\.0\.0\.1:\d+)', out)
        expect(len(servers) >= 2, f'the two servers\' addresses are printed ({servers})')
        for url in servers[:2]:
            expect(not answers(url), f'the demo stopped its server at {url} when it ended')
        print(f'{client}: {"agent" if not bad else "FAILED"}: {prompt - recomputed} of {prompt} tokens cached, '
              f'{right} vs {ref_right} right; {"examples/frame_agent.mjs" if "frame_agent.mjs" in out else "curl"}')
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--kamera', required=True)
    ap.add_argument('--npm', default='build/npm')
    a = ap.parse_args()
    if not shutil.which('jq'):
        print('SKIP: jq is not installed (scripts/install-deps.sh runtime)')
        return 77
    failures = check(a.kamera, a.npm, 'node') + check(a.kamera, a.npm, 'curl')
    for f in failures:
        print(f'FAIL: {f}')
    print('demo output check', 'failed' if failures else 'passed')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
