#!/usr/bin/env python3
"""The layering of src/ as a test: no room includes a header of a room it does not link.

The link graph is the one src/CMakeLists.txt declares (`kamera_layer(name dep...)`, plus the
targets named below for the C API and the CLI). A room may include its own headers and those of
every room it reaches through its links, never one above it. Each include of another room's header
is checked; a violation prints `file:line: room 'a' includes 'b/x.h' but does not link kamera_b`
and the script exits 1.

  scripts/check-layers.py [--src DIR]      check a tree (default: src/ beside this script)
  scripts/check-layers.py --self-test      check the real tree, then a copy of it with one upward
                                           include added; fails unless the first passes and the
                                           second is caught
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

LAYER = re.compile(r'^\s*kamera_layer\((\w+)\s*([^)]*)\)', re.M)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/[^"]+"', re.M)

# Targets outside kamera_layer(): the C API's shared library and the CLI, with what they link
# (src/api/CMakeLists.txt, src/CMakeLists.txt's add_executable(kamera ...)).
EXTRA_TARGETS = {
    'api': ['window', 'vision'],
    'tools': ['bench', 'demo', 'server', 'route'],
}


def link_graph(src):
    text = open(os.path.join(src, 'CMakeLists.txt'), encoding='utf-8').read()
    graph = {}
    for name, deps in LAYER.findall(text):
        graph[name] = [d[len('kamera_'):] for d in deps.split() if d.startswith('kamera_')]
    for name, deps in EXTRA_TARGETS.items():
        graph.setdefault(name, deps)
    return graph


def reachable(graph, room):
    seen, todo = {room}, [room]
    while todo:
        for d in graph.get(todo.pop(), []):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def violations(src):
    graph = link_graph(src)
    rooms = {d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))}
    missing = sorted(rooms - graph.keys())
    out = [f'{src}/{r}/: a folder of src/ that no kamera_layer() declares' for r in missing]
    for room in sorted(rooms & graph.keys()):
        allowed = reachable(graph, room)
        folder = os.path.join(src, room)
        for dirpath, _, files in os.walk(folder):
            for f in sorted(files):
                if not f.endswith(('.h', '.cpp', '.inc')):
                    continue
                path = os.path.join(dirpath, f)
                text = open(path, encoding='utf-8').read()
                for m in INCLUDE.finditer(text):
                    target = m.group(1)
                    if target not in rooms or target in allowed:
                        continue
                    line = text.count('\n', 0, m.start()) + 1
                    out.append(f'{os.path.relpath(path, os.path.dirname(src))}:{line}: room '
                               f"'{room}' includes '{m.group(0).split(chr(34))[1]}' but does not "
                               f'link kamera_{target}')
    return out


def self_test(src):
    bad = violations(src)
    if bad:
        print('\n'.join(bad))
        print('check-layers self-test: the real tree has upward includes', file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'src')
        shutil.copytree(src, copy, ignore=shutil.ignore_patterns('*.o'))
        victim = os.path.join(copy, 'core', 'status.h')
        with open(victim, 'a', encoding='utf-8') as f:
            f.write('\n#include "server/server.h"  // deliberate upward include (self-test)\n')
        caught = violations(copy)
        if len(caught) != 1 or "room 'core' includes 'server/server.h'" not in caught[0]:
            print('check-layers self-test: a deliberate upward include in core/ was not caught '
                  f'(got {caught})', file=sys.stderr)
            return 1
        print(f'check-layers self-test: caught {caught[0]}')
    print('check-layers: no upward include in', src)
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--src', default=os.path.join(here, '..', 'src'))
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    src = os.path.normpath(a.src)
    if a.self_test:
        return self_test(src)
    bad = violations(src)
    if bad:
        print('\n'.join(bad))
        return 1
    print('check-layers: no upward include in', src)
    return 0


if __name__ == '__main__':
    sys.exit(main())
