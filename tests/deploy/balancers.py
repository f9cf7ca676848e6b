#!/usr/bin/env python3
"""The deploy/ configs run for real: Debian's HAProxy and nginx in front of two `kamera serve`
processes (a tiny random-weight model made by `kamera make-model`), on free loopback ports.

For each config: requests pass through (chat completions, 200, a streamed answer arrives as SSE
ending in [DONE]); round robin spreads requests without a session over both servers (each
server's /metrics counts them); consistent hashing keeps every X-Session-Id on one server and
spreads 16 sessions over both; a server stopped is skipped by the next requests (HAProxy's
health check, nginx's passive one).

  tests/deploy/balancers.py --kamera build/bin/kamera [--deploy deploy]

Exit 77 (skipped) when haproxy or nginx is not installed (scripts/install-deps.sh installs both).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'scripts'))
from fleet_bench import render  # noqa: E402
from serve_bench import ServerProc, free_port  # noqa: E402

CHAT = {'messages': [{'role': 'user', 'content': 'Say something about the sea.'}],
        'max_tokens': 4, 'temperature': 0}


def request(port, body, headers=None, timeout=60):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    h = {'Content-Type': 'application/json'}
    h.update(headers or {})
    c.request('POST', '/v1/chat/completions', json.dumps(body), h)
    r = c.getresponse()
    return r.status, r.getheader('Content-Type', ''), r.read()


def chat_count(port):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    c.request('GET', '/metrics')
    m = re.search(r'kamera_requests_total\{endpoint="chat"\} (\d+)', c.getresponse().read().decode())
    return int(m.group(1)) if m else -1


class Balancer:
    def __init__(self, kind, conf, workdir, front):
        self.front = front
        log = open(os.path.join(workdir, kind + '.log'), 'wb')
        if kind == 'haproxy':
            argv = ['haproxy', '-db', '-f', conf]
        else:
            os.makedirs(os.path.join(workdir, 'tmp'), exist_ok=True)
            argv = ['nginx', '-p', workdir, '-c', conf, '-g', 'daemon off;']
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        for _ in range(100):
            try:
                http.client.HTTPConnection('127.0.0.1', front, timeout=1).connect()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(kind + ' did not start: ' + conf)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


PASSED = []


def check(cond, what, failures):
    print(('ok   ' if cond else 'FAIL ') + what)
    (PASSED if cond else failures).append(what)


def run_config(name, path, kamera_cmd, workdir, failures):
    kind = 'haproxy' if name.startswith('haproxy') else 'nginx'
    hashed = 'session-hash' in name
    servers = [ServerProc(kamera_cmd) for _ in range(2)]
    front = free_port()
    conf = os.path.join(workdir, name)
    render(path, conf, front, [s.port for s in servers])
    bal = Balancer(kind, conf, workdir, front)
    try:
        if kind == 'haproxy':
            time.sleep(1.2)  # the first health checks pass
        before = [chat_count(s.port) for s in servers]
        stream_status, ctype, body = request(front, dict(CHAT, stream=True),
                                             {'X-Session-Id': 'stream'})
        check(stream_status == 200 and ctype.startswith('text/event-stream') and
              body.rstrip().endswith(b'data: [DONE]'), name + ': a stream passes through',
              failures)
        if hashed:
            spread = set()
            for i in range(16):
                where = set()
                for _ in range(3):
                    counts = [chat_count(s.port) for s in servers]
                    st, _, _ = request(front, CHAT, {'X-Session-Id': 'agent-%d' % i})
                    after = [chat_count(s.port) for s in servers]
                    where |= {k for k in range(2) if after[k] > counts[k]}
                    if st != 200:
                        where.add('status %d' % st)
                check(len(where) == 1, name + ': session agent-%d stays on one server (%s)'
                      % (i, sorted(map(str, where))), failures)
                spread |= where
            check(len(spread) == 2, name + ': 16 sessions spread over both servers', failures)
        else:
            for _ in range(6):
                st, _, _ = request(front, CHAT)
                if st != 200:
                    check(False, name + ': status %d' % st, failures)
            got = [chat_count(s.port) - b for s, b in zip(servers, before)]
            check(sum(got) == 7 and min(got) >= 3, name + ': round robin spreads 7 requests '
                  '(%s)' % got, failures)
        # One server gone: the next requests are answered by the other.
        servers[0].stop()
        ok = 0
        for i in range(6):
            st, _, _ = request(front, CHAT, {'X-Session-Id': 'agent-%d' % i})
            ok += st == 200
            time.sleep(0.2)
        check(ok >= 5, name + ': a stopped server is skipped (%d of 6 answered)' % ok, failures)
    finally:
        bal.stop()
        for s in servers:
            s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--kamera', required=True)
    ap.add_argument('--deploy', default=os.path.join(os.path.dirname(__file__), '..', '..',
                                                     'deploy'))
    args = ap.parse_args()
    if not shutil.which('haproxy') or not shutil.which('nginx'):
        print('SKIP: haproxy or nginx is not installed (scripts/install-deps.sh installs both)')
        return 77
    workdir = tempfile.mkdtemp(prefix='kamera-deploy-')
    try:
        model = os.path.join(workdir, 'tiny.gguf')
        subprocess.run([args.kamera, 'make-model', '--arch', 'qwen2', '--preset', 'tiny',
                        '--seed', '3', '-o', model], check=True, stdout=subprocess.DEVNULL)
        cmd = '%s serve -m %s -t 1 --port {port}' % (args.kamera, model)
        failures = []
        for name in sorted(os.listdir(args.deploy)):
            if name.endswith('.cfg') or name.endswith('.conf'):
                run_config(name, os.path.join(args.deploy, name), cmd, workdir, failures)
        print('%d passed, %d failed' % (len(PASSED), len(failures)))
        return 1 if failures else 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
