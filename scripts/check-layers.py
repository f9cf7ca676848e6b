#!/usr/bin/env python3
"""The layering of src/ as a test: no room includes a header of a room it does not link.

The link graph is the one src/CMakeLists.txt declares (`kamera_layer(name dep...)`, plus the
targets named below for the C API and the CLI). A room may include its own headers and those of
every room it reaches through its links, never one above it. Each include of another room's header
is checked; a violation prints `file:line: room 'a' includes 'b/x.h' but does not link kamera_b`
and the script exits 1.

JSON lives at the edge: no file of the rooms below the API layer (JSON_FREE) includes a JSON
header (nlohmann/json, server/openai.h), directly or through the headers it includes. A violation
prints the include chain, e.g. `serve/scheduler.h -> context/context.h -> jinja/value.h ->
<nlohmann/json.hpp>`.

No include loop among the modules of the request path's rooms (NO_LOOPS; a module is a header
and its .cpp; server_impl.h is server's): `module loop: server/openai -> server/prompt_parts ->
server/openai`.

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
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)

# The rooms on the request path below the API layer: a request reaches them as typed data (a
# plan, tokens, chunks, events), never as JSON. The rooms above them (server/, route/, tools/, the
# evaluation's result files) and the ones whose input format is JSON (tokenizer/'s tokenizer.json,
# jinja/'s template values, grammar/'s JSON Schema, toolcall/'s call arguments) may include it.
# context/ (its chat session renders a Jinja template) and vision/ (its chat session) are left out.
JSON_FREE = ['core', 'kv', 'ops', 'media', 'gguf', 'model', 'generate', 'reuse', 'store', 'cache',
             'window', 'audio', 'serve', 'api']
JSON_HEADERS = ('nlohmann/', 'server/openai.h')
NO_LOOPS = ['cache', 'serve', 'server', 'route']
MODULE_ALIASES = {'server/server_impl': 'server/server'}

# Targets outside kamera_layer(): the C API's shared library and the CLI, with what they link
# (src/api/CMakeLists.txt, src/CMakeLists.txt's add_executable(kamera ...)).
EXTRA_TARGETS = {
    'api': ['window', 'vision', 'audio'],
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
    return layer_violations(src) + json_violations(src) + loop_violations(src)


def layer_violations(src):
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


def json_chain(src, path, seen):
    """The include chain from `path` (relative to src) to a JSON header, or None."""
    if path in seen:
        return None
    seen.add(path)
    full = os.path.join(src, path)
    if not os.path.exists(full):
        return None
    text = open(full, encoding='utf-8').read()
    for m in ANY_INCLUDE.finditer(text):
        name = m.group(2)
        if name.startswith(JSON_HEADERS):
            return [path, ('<%s>' if m.group(1) == '<' else '"%s"') % name]
        if m.group(1) == '"':
            rest = json_chain(src, name, seen)
            if rest:
                return [path] + rest
    return None


def json_violations(src):
    out = []
    for room in JSON_FREE:
        folder = os.path.join(src, room)
        if not os.path.isdir(folder):
            continue
        for f in sorted(os.listdir(folder)):
            if f.endswith(('.h', '.cpp', '.inc')):
                chain = json_chain(src, f'{room}/{f}', set())
                if chain:
                    out.append(f'src/{room}/{f}: JSON below the API layer: ' + ' -> '.join(chain))
    return out


def module_of(path):
    m = os.path.splitext(path)[0]
    return MODULE_ALIASES.get(m, m)


def loop_violations(src):
    graph = {}
    for room in NO_LOOPS:
        folder = os.path.join(src, room)
        if not os.path.isdir(folder):
            continue
        for f in sorted(os.listdir(folder)):
            if not f.endswith(('.h', '.cpp')):
                continue
            mod = module_of(f'{room}/{f}')
            text = open(os.path.join(folder, f), encoding='utf-8').read()
            for m in ANY_INCLUDE.finditer(text):
                target = module_of(m.group(2))
                if m.group(1) == '"' and target != mod and target.split('/')[0] in NO_LOOPS:
                    graph.setdefault(mod, set()).add(target)
    out, state, path = [], {}, []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                out.append('module loop: ' + ' -> '.join(path[path.index(w):] + [w]))
            elif w not in state:
                visit(w)
        path.pop()
        state[v] = 2

    for v in sorted(graph):
        if v not in state:
            visit(v)
    return out


# What the self-test plants in a copy of the tree, and how the report must name it.
PLANTED = [
    ('core/status.h', '#include "server/server.h"  // deliberate upward include (self-test)',
     lambda c: "room 'core' includes 'server/server.h'" in c),
    ('serve/events.h', '#include <nlohmann/json.hpp>  // deliberate JSON below the API (self-test)',
     lambda c: 'serve/events.h -> <nlohmann/json.hpp>' in c),
    ('serve/events.cpp', '#include "serve/generation.h"  // deliberate loop (self-test)',
     lambda c: c.startswith('module loop') and 'serve/events' in c),
]


def caught_when_planted(src, path, line, named):
    """The violations of a copy of src with `line` appended to `path` that `named` accepts."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, 'src')
        shutil.copytree(src, copy, ignore=shutil.ignore_patterns('*.o'))
        with open(os.path.join(copy, path), 'a', encoding='utf-8') as f:
            f.write('\n' + line + '\n')
        return [c for c in violations(copy) if named(c)]


def self_test(src):
    bad = violations(src)
    if bad:
        print('\n'.join(bad))
        print('check-layers self-test: the real tree breaks its layering', file=sys.stderr)
        return 1
    for path, line, named in PLANTED:
        caught = caught_when_planted(src, path, line, named)
        if not caught:
            print(f'check-layers self-test: "{line}" in {path} was not caught', file=sys.stderr)
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
