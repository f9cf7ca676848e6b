#!/usr/bin/env python3
"""Runs docs/VISION.md's `kamera serve -m decoder.gguf --mmproj mmproj.gguf` on the tiny LLaVA-1.5
pair (tests/data/llava, as the working directory) on a free port, sends its picture twice through
/v1/chat/completions and checks that the picture is 64 image tokens, encoded the first time and
not the second. With --model ../llava/decoder.gguf --picture img_40x64.png --rows 240 in
tests/data/llava16, the same for the tiny LLaVA-1.6 tower (its grid: 240 rows). Stops the server it
started (by its process)."""
import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def post(port, body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}/v1/chat/completions',
                                 data=json.dumps(body).encode(),
                                 headers={'content-type': 'application/json'})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--kamera', required=True)
    ap.add_argument('--dir', required=True)
    ap.add_argument('--model', default='decoder.gguf')
    ap.add_argument('--picture', default='img_32.png')
    ap.add_argument('--rows', type=int, default=64)
    a = ap.parse_args()
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([a.kamera, 'serve', '-m', a.model, '--mmproj', 'mmproj.gguf',
                             '-t', '1', '--port', str(port)], cwd=a.dir, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f'http://127.0.0.1:{port}/health', timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        with open(os.path.join(a.dir, a.picture), 'rb') as f:
            url = 'data:image/png;base64,' + base64.b64encode(f.read()).decode()
        body = {'messages': [{'role': 'user', 'content': [
            {'type': 'image_url', 'image_url': {'url': url}}, {'type': 'text', 'text': 'the'}]}],
            'max_tokens': 2, 'temperature': 0}
        first, second = post(port, body)['usage']['images'], post(port, body)['usage']['images']
        print('first', first, 'second', second)
        ok = (first['image_tokens'] == a.rows and first['encoded'] == 1 and second['encoded'] == 0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    if not ok:
        log.seek(0)
        sys.stdout.write(log.read().decode(errors='replace'))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
