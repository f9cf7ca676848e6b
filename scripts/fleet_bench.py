#!/usr/bin/env python3
"""Issue 29's loopback measurement: a Redis Cluster (3 masters + 3 replicas), three `kamera serve`
(one engine thread each) sharing it, and one front per arm, replaying the multi-agent trace
(scripts/replay_fleet.mjs: 16 agents, a shared system prompt, a pool of documents, each agent's
sliding window of observations) through the official openai npm client.

Arms: router (kamera route, score policy, the servers' events read from the cluster),
round-robin (HAProxy, deploy/haproxy-round-robin.cfg), session-hash (nginx, consistent hashing on
X-Session-Id, deploy/nginx-session-hash.conf). Every arm starts from empty servers and an empty
cluster. Per arm: throughput, TTFT p50/p99, prompt tokens recomputed, bytes the servers fetched
from the cluster (kamera_tier_read_bytes_total), requests per server (imbalance = max / mean).
Then the cost model's constants are fitted on the round-robin arm (TTFT against recomputed
tokens: least squares) and written with the router arm's trace for scripts/fleet_sim.py.

  python3 scripts/fleet_bench.py --kamera build/bin/kamera --out DIR [--dims D] [--agents 16]
         [--turns 6] [--arms router,round-robin,session-hash] [--load-penalty X] [--serve-args '...']
Run timing under `flock -x /tmp/kamera-cpu.lock`.
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_bench import ServerProc, free_port  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), '..')
PASSWORD = 'fleet-bench-password'


def bindable(port):
    s = socket.socket()
    try:
        s.bind(('127.0.0.1', port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def redis(port, *args):
    out = subprocess.run(['redis-cli', '-p', str(port), '-a', PASSWORD, '--no-auth-warning'] +
                         list(args), capture_output=True, text=True, timeout=10)
    return out.stdout.strip()


class Cluster:
    def __init__(self, workdir):
        self.dir = os.path.join(workdir, 'redis')
        os.makedirs(self.dir, exist_ok=True)
        self.ports = []
        while len(self.ports) < 6:
            p = random.randint(20000, 39999)
            if p not in self.ports and bindable(p) and bindable(p + 10000):
                self.ports.append(p)
        for p in self.ports:
            subprocess.run(['redis-server', '--port', str(p), '--bind', '127.0.0.1',
                            '--cluster-enabled', 'yes', '--cluster-config-file',
                            '%s/nodes-%d.conf' % (self.dir, p), '--cluster-node-timeout', '1000',
                            '--requirepass', PASSWORD, '--masterauth', PASSWORD, '--save', '',
                            '--appendonly', 'no', '--daemonize', 'yes', '--dir', self.dir,
                            '--pidfile', '%s/%d.pid' % (self.dir, p), '--logfile',
                            '%s/%d.log' % (self.dir, p)], check=True)
        for p in self.ports:
            for _ in range(100):
                if redis(p, 'PING') == 'PONG':
                    break
                time.sleep(0.05)
        subprocess.run(['redis-cli', '-a', PASSWORD, '--no-auth-warning', '--cluster', 'create'] +
                       ['127.0.0.1:%d' % p for p in self.ports] +
                       ['--cluster-replicas', '1', '--cluster-yes'], check=True,
                       stdout=subprocess.DEVNULL)
        for _ in range(300):
            if all('cluster_state:ok' in redis(p, 'CLUSTER', 'INFO') for p in self.ports):
                break
            time.sleep(0.05)

    def url(self):
        return 'redis://:%s@' % PASSWORD + ','.join('127.0.0.1:%d' % p for p in self.ports[:3])

    def flush(self):
        for p in self.ports:
            redis(p, 'FLUSHALL')  # replicas refuse it (READONLY); masters replicate it

    def stop(self):
        for p in self.ports:
            try:
                os.kill(int(open('%s/%d.pid' % (self.dir, p)).read()), 9)
            except (OSError, ValueError):
                pass


def metrics(port):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
    c.request('GET', '/metrics')
    out = {}
    for line in c.getresponse().read().decode().splitlines():
        if line and not line.startswith('#'):
            k, _, v = line.rpartition(' ')
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def render(src, dst, front, backends):
    """A deploy/ config with its addresses rewritten: 127.0.0.1:8080 the front, 127.0.0.1:808N the
    N-th backend (lines of backends past those given dropped)."""
    out = []
    for line in open(src):
        m = re.search(r'127\.0\.0\.1:808([0-9])', line)
        if m and m.group(1) == '0':
            line = line.replace('127.0.0.1:8080', '127.0.0.1:%d' % front)
        elif m:
            n = int(m.group(1))
            if n > len(backends):
                continue
            line = line.replace('127.0.0.1:808%d' % n, '127.0.0.1:%d' % backends[n - 1])
        out.append(line)
    open(dst, 'w').writelines(out)


def wait_port(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            raise RuntimeError(what + ' exited')
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(what + ' did not start')


def run_arm(arm, a, cluster, model, key, workdir):
    cluster.flush()
    servers = []
    for _ in range(3):
        port = free_port()
        cmd = ('%s serve -m %s -t 1 --port %d --redis %s --store-key-file %s --advertise '
               'http://127.0.0.1:%d --max-queue 256 %s' % (a.kamera, model, port, cluster.url(),
                                                           key, port, a.serve_args))
        s = ServerProc(cmd.replace('--port %d' % port, '--port {port}').replace(
            'http://127.0.0.1:%d' % port, 'http://127.0.0.1:{port}'))
        servers.append(s)
    front = free_port()
    log = open(os.path.join(workdir, arm + '.log'), 'wb')
    if arm == 'router':
        argv = [a.kamera, 'route', '-m', model, '--port', str(front), '--redis', cluster.url(),
                '--load-penalty', str(a.load_penalty)]
        for s in servers:
            argv += ['--backend', 'http://127.0.0.1:%d' % s.port]
    elif arm == 'round-robin':
        conf = os.path.join(workdir, 'haproxy.cfg')
        render(os.path.join(ROOT, 'deploy', 'haproxy-round-robin.cfg'), conf, front,
               [s.port for s in servers])
        argv = ['haproxy', '-db', '-f', conf]
    else:
        conf = os.path.join(workdir, 'nginx.conf')
        os.makedirs(os.path.join(workdir, 'tmp'), exist_ok=True)
        render(os.path.join(ROOT, 'deploy', 'nginx-session-hash.conf'), conf, front,
               [s.port for s in servers])
        argv = ['nginx', '-p', workdir, '-c', conf, '-g', 'daemon off;']
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_port(front, proc, arm)
        time.sleep(1.5)  # health checks, the router's event subscription
        out = os.path.join(workdir, arm + '.json')
        extra = ['--segments-url', 'http://127.0.0.1:%d' % front] if arm == 'router' else []
        run = subprocess.run(['node', os.path.join(ROOT, 'scripts', 'replay_fleet.mjs'),
                              '--base-url', 'http://127.0.0.1:%d/v1' % front, '--agents',
                              str(a.agents), '--turns', str(a.turns), '--max-tokens',
                              str(a.max_tokens), '--npm', a.npm, '--out', out] + extra,
                             capture_output=True, text=True, timeout=1800)
        if run.returncode == 77:
            print(run.stdout)
            sys.exit(77)
        if run.returncode != 0:
            raise RuntimeError('replay failed: ' + run.stdout + run.stderr)
        data = json.load(open(out))
        m = [metrics(s.port) for s in servers]
        summary = data['summary']
        reqs = [x.get('kamera_requests_total{endpoint="chat"}', 0) for x in m]
        summary['requests_per_server'] = reqs
        # the first turns arrive together on empty servers: what they share is computed once per
        # server at best (--hold-shared-tokens), their observations always
        summary['recomputed_first_turns'] = sum(r['recomputed'] for r in data['results']
                                                if r['turn'] == 0)
        summary['recomputed_later_turns'] = summary['recomputed_tokens'] - summary[
            'recomputed_first_turns']
        summary['imbalance'] = max(reqs) / (sum(reqs) / len(reqs)) if sum(reqs) else 0
        summary['redis_read_bytes'] = sum(x.get('kamera_tier_read_bytes_total{tier="redis"}', 0)
                                          for x in m)
        summary['canonicals_formed'] = sum(x.get('kamera_background_canonicals_total', 0)
                                           for x in m)
        summary['redis_bytes_written'] = sum(x.get('kamera_store_bytes{tier="redis"}', 0)
                                             for x in m)
        summary['store_patch_segments'] = sum(
            x.get('kamera_segments_total{source="store_patch"}', 0) +
            x.get('kamera_segments_total{source="store_patch_nearest"}', 0) for x in m)
        summary['fetch_rtt_us'] = [x.get('kamera_tier_fetch_rtt_us{tier="redis"}', 0) for x in m]
        summary['fetch_us_per_kib'] = [x.get('kamera_tier_fetch_us_per_kib{tier="redis"}', 0)
                                       for x in m]
        if arm == 'router':
            c = http.client.HTTPConnection('127.0.0.1', front, timeout=10)
            c.request('GET', '/router/state')
            summary['router'] = json.loads(c.getresponse().read())
        return summary, data['results']
    finally:
        proc.terminate()
        proc.wait(10)
        for s in servers:
            s.stop()


def start_server(a, model, cluster, key):
    cmd = ('%s serve -m %s -t 1 --port {port} --redis %s --store-key-file %s --advertise '
           'http://127.0.0.1:{port} --max-queue 256 %s' % (a.kamera, model, cluster.url(), key,
                                                           a.serve_args))
    return ServerProc(cmd)


def calibrate(a, cluster, model, key, workdir):
    """One server, one request at a time: overhead, prefill and decode seconds per token; then a
    second server serves agent 0's first turn from what the first stored (the fetch measured)."""
    cluster.flush()
    first, second = start_server(a, model, cluster, key), start_server(a, model, cluster, key)
    try:
        out = os.path.join(workdir, 'calibrate.json')
        run = subprocess.run(['node', os.path.join(ROOT, 'scripts', 'replay_fleet.mjs'),
                              '--base-url', 'http://127.0.0.1:%d/v1' % first.port, '--second-url',
                              'http://127.0.0.1:%d/v1' % second.port, '--calibrate', '1',
                              '--agents', str(a.agents), '--turns', str(a.turns), '--npm', a.npm,
                              '--out', out], capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            raise RuntimeError('calibration failed: ' + run.stdout + run.stderr)
        cal = json.load(open(out))
        m = metrics(second.port)
        cal['fetch_rtt_us'] = m.get('kamera_tier_fetch_rtt_us{tier="redis"}', 0)
        cal['fetch_us_per_kib'] = m.get('kamera_tier_fetch_us_per_kib{tier="redis"}', 0)
        cal['fetch_read_bytes'] = m.get('kamera_tier_read_bytes_total{tier="redis"}', 0)
        cal['fetch_batches'] = m.get('kamera_store_fetch_batches_total', 0)
        return cal
    finally:
        first.stop()
        second.stop()


def fit(results):
    """TTFT = overhead + prefill_s_per_token * recomputed (least squares), decode per token."""
    xs = [r['recomputed'] for r in results]
    ys = [r['ttft_ms'] / 1e3 for r in results]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs) or 1
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    dec = [(r['total_ms'] - r['ttft_ms']) / 1e3 / max(1, r['completion_tokens'] - 1)
           for r in results]
    return max(slope, 1e-7), max(my - slope * mx, 0.0), sorted(dec)[len(dec) // 2]


def lower_bound(results):
    """Prompt tokens that any policy recomputes, in the order the requests were sent: each
    segment the first time any request of the trace has it (no server, and no cluster, can hold
    it before), and every request's last segment (the query, always run for the first token's
    logits). Needs the router arm's cuts (every request's whole segment list)."""
    seen, first, later = set(), 0, 0
    for r in sorted(results, key=lambda r: r['t_send_ms']):
        cut = r.get('cut') or []
        for i, seg in enumerate(cut):
            if i + 1 == len(cut) or seg['id'] not in seen:
                if r['turn'] == 0:
                    first += seg['tokens']
                else:
                    later += seg['tokens']
            seen.add(seg['id'])
    return first, later


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument('--kamera', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--dims', default='dim=256,layers=4,heads=8,kv_heads=2,head_dim=32,ffn=768,ctx=4096')
    ap.add_argument('--agents', type=int, default=16)
    ap.add_argument('--turns', type=int, default=6)
    ap.add_argument('--max-tokens', type=int, default=8)
    ap.add_argument('--load-penalty', type=float, default=1.0)
    ap.add_argument('--arms', default='router,round-robin,session-hash')
    ap.add_argument('--serve-args', default='',
                    help="more flags for every kamera serve (e.g. '--hold-shared-tokens 0')")
    ap.add_argument('--npm', default=os.path.join(ROOT, 'build', 'npm'))
    a = ap.parse_args()
    for tool in ('redis-server', 'redis-cli', 'haproxy', 'nginx', 'node'):
        if not shutil.which(tool):
            print('SKIP: %s is not installed' % tool)
            return 77
    os.makedirs(a.out, exist_ok=True)
    workdir = os.path.join(a.out, 'work')
    os.makedirs(workdir, exist_ok=True)
    model = os.path.join(workdir, 'model.gguf')
    subprocess.run([a.kamera, 'make-model', '--arch', 'qwen2', '--preset', 'tiny', '--dims',
                    a.dims, '--seed', '29', '-o', model], check=True, stdout=subprocess.DEVNULL)
    key = os.path.join(workdir, 'store.key')
    open(key, 'w').write('fleet-bench store key, 32 bytes!')
    cluster = Cluster(workdir)
    report = {'host': subprocess.run(['sh', '-c', "grep -m1 'model name' /proc/cpuinfo"],
                                     capture_output=True, text=True).stdout.strip(),
              'dims': a.dims, 'agents': a.agents, 'turns': a.turns, 'arms': {}}
    traces = {}
    try:
        measured = calibrate(a, cluster, model, key, workdir)
        report['measured'] = measured
        print('calibration', json.dumps(measured))
        for arm in a.arms.split(','):
            summary, results = run_arm(arm, a, cluster, model, key, workdir)
            report['arms'][arm] = summary
            traces[arm] = results
            print(arm, json.dumps({k: v for k, v in summary.items() if k != 'router'}))
    finally:
        cluster.stop()
    if 'router' in traces:
        cal = {'prefill_s_per_token': measured['prefill_s_per_token'],
               'overhead_s': measured['overhead_s'],
               'decode_s_per_token': measured['decode_s_per_token'],
               'fetch_rtt_s': 1e-6 * (measured['fetch_rtt_us'] or 50),
               'fetch_bytes_per_s': 1024e6 / max(measured['fetch_us_per_kib'], 0.01),
               'row_bytes': report['arms']['router']['row_bytes'], 'memory_bytes': 192 << 20,
               'compact_tokens': 64,
               'load_penalty': a.load_penalty}
        report['calibration'] = cal
        json.dump(cal, open(os.path.join(a.out, 'calibration.json'), 'w'), indent=1)
        json.dump({'results': traces['router']}, open(os.path.join(a.out, 'trace.json'), 'w'))
    json.dump(report, open(os.path.join(a.out, 'fleet.json'), 'w'), indent=1)
    print('| arm | requests/s | completion tok/s | TTFT p50 ms | TTFT p99 ms | prompt tokens | '
          'recomputed (first turns + later) | canonicals formed | Redis bytes written | '
          'Redis bytes read | requests per server | imbalance |')
    print('|---|---|---|---|---|---|---|---|---|---|---|---|')
    for arm, s in report['arms'].items():
        print('| %s | %.2f | %.1f | %.0f | %.0f | %d | %d (%d + %d) | %d | %d | %d | %s | %.2f |' % (
            arm, s['requests_per_s'], s['completion_tokens_per_s'], s['ttft_p50_ms'],
            s['ttft_p99_ms'], s['prompt_tokens'], s['recomputed_tokens'],
            s['recomputed_first_turns'], s['recomputed_later_turns'], s['canonicals_formed'],
            s['redis_bytes_written'], s['redis_read_bytes'],
            '/'.join('%d' % r for r in s['requests_per_server']), s['imbalance']))
    if 'router' in traces:
        first, later = lower_bound(traces['router'])
        report['lower_bound'] = {'first_turns': first, 'later_turns': later}
        json.dump(report, open(os.path.join(a.out, 'fleet.json'), 'w'), indent=1)
        print('| lower bound (any policy: each segment once in the whole fleet, and every query) '
              '| | | | | | %d (%d + %d) | | | | | |' % (first + later, first, later))
    return 0


if __name__ == '__main__':
    sys.exit(main())
