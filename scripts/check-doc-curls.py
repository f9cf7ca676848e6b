#!/usr/bin/env python3
"""Runs every curl example of a document against a live `kamera serve`, as a test.

Every ```sh block of the document that holds a `curl` command is run with bash (set -euo
pipefail), in order, in one shell session per block, against a server on a free port (the
examples' localhost:8080 is rewritten to it); a block that calls /v1/rerank runs against a second
server, on a tiny reranker (`kamera make-model --arch qwen3 --reranker`). `curl` is wrapped so that any answer of 400 or more
fails the block. A block may set shell variables for later lines (e.g. a chunk id read with jq).
The test fails when a block fails, when a curl line outside such a block is found, or when a
curl example sends a body without `Content-Type: application/json`.

  scripts/check-doc-curls.py --kamera build/bin/kamera [--doc docs/SERVER.md]
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BLOCK = re.compile(r'^```sh\n(.*?)^```', re.M | re.S)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def curl_blocks(text):
    """The sh blocks with a curl command, and the curl lines found outside them."""
    blocks, inside = [], set()
    for m in BLOCK.finditer(text):
        body = m.group(1)
        if re.search(r'^\s*[^#\n]*\bcurl\b', body, re.M):
            blocks.append((text.count('\n', 0, m.start()) + 1, body))
            inside.update(range(m.start(), m.end()))
    stray = [text.count('\n', 0, m.start()) + 1 for m in re.finditer(r'\bcurl\s+-', text)
             if m.start() not in inside]
    return blocks, stray


def commands(body):
    """The commands of a block, with backslash continuations joined."""
    return re.sub(r'\\\n', ' ', body).splitlines()


def check_content_types(line0, body):
    bad = []
    for cmd in commands(body):
        if re.search(r'\bcurl\b', cmd) and re.search(r'\s(-d|--data)\b', cmd) and \
                'Content-Type: application/json' not in cmd:
            bad.append(f'line {line0}: a curl example posts without Content-Type: '
                       f'application/json: {cmd.strip()[:100]}')
    return bad


def start_server(kamera, tmp, reranker=False):
    name = 'reranker' if reranker else 'tiny'
    model = os.path.join(tmp, name + '.gguf')
    make = [kamera, 'make-model', '--arch', 'qwen3' if reranker else 'qwen2', '--preset', 'tiny',
            '--seed', '1', '-o', model] + (['--reranker'] if reranker else [])
    subprocess.run(make, check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    log = open(os.path.join(tmp, name + '-serve.log'), 'w')
    # with a chat template (the tiny model has none), so that its fields can be shown
    serve = [kamera, 'serve', '-m', model, '--port', str(port)]
    serve += ['--rerank'] if reranker else ['--chat-template', 'chatml']
    proc = subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            urllib.request.urlopen(f'http://127.0.0.1:{port}/health', timeout=1)
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit(f'check-doc-curls: the server did not start ({tmp}/serve.log)')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--kamera', required=True)
    ap.add_argument('--doc', default=os.path.join(os.path.dirname(__file__), '..', 'docs',
                                                  'SERVER.md'))
    a = ap.parse_args()
    text = open(a.doc, encoding='utf-8').read()
    blocks, stray = curl_blocks(text)
    failures = [f'line {n}: a curl example outside a ```sh block (not run)' for n in stray]
    for line0, body in blocks:
        failures += check_content_types(line0, body)
    if not blocks:
        failures.append('no curl examples found')
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_server(a.kamera, tmp)
        procs = [proc]
        try:
            rerank_port = None
            for line0, body in blocks:
                if '/v1/rerank' in body and rerank_port is None:
                    rerank_proc, rerank_port = start_server(a.kamera, tmp, reranker=True)
                    procs.append(rerank_proc)
                block_port = rerank_port if '/v1/rerank' in body else port
                # curl's -f becomes --fail-with-body (the two exclude each other): any answer of
                # 400 or more fails the block, and its body is shown
                run = re.sub(r'\bcurl -f(\w*)', r'curl -\1', body)
                script = ('set -euo pipefail\n'
                          'curl() { command curl --fail-with-body "$@"; }\n' +
                          run.replace('localhost:8080', f'localhost:{block_port}'))
                r = subprocess.run(['bash', '-c', script], capture_output=True, text=True,
                                   timeout=120)
                status = 'ok' if r.returncode == 0 else f'FAILED (exit {r.returncode})'
                print(f'{os.path.basename(a.doc)}:{line0}: {status}')
                if r.returncode != 0:
                    failures.append(f'line {line0}: exit {r.returncode}\n{r.stdout[-2000:]}'
                                    f'{r.stderr[-2000:]}')
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=10)
    for f in failures:
        print('check-doc-curls: ' + f, file=sys.stderr)
    print(f'check-doc-curls: {len(blocks)} blocks, {len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
