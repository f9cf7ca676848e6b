#!/usr/bin/env bash
# Whole-model speed: `kamera bench` vs each given llama.cpp build's `llama-bench`, same files,
# same host, interleaved (every round runs each engine once per file and test, one after the
# other), medians over the rounds. Prints a Markdown ratio table with the host's ISA and, beside
# every decode figure, kamera's read floor (weight bytes per token / measured read bandwidth).
#
#   bash scripts/bench-vs-llamacpp.sh [options] LLAMA_CPP_BUILD_DIR...
#     --kamera PATH    the kamera binary (default: build/bin/kamera)
#     --kamera-base PATH  another kamera binary (e.g. main's), run right after --kamera's in every
#                      round: the table adds its tok/s and kamera / base
#     --dir DIR        where the model files are made and kept (default: /tmp/kamera-vs-llamacpp)
#     --rounds N       interleaved rounds, medians reported (default 3, at least 3 unless --tiny)
#     --threads T      threads for both engines (default 2)
#     --types "..."    file types (default "Q8_0 Q4_K_M F16")
#     --pp N, --tg N   prompt tokens of the prefill test, tokens of the decode test (512, 128)
#     --tiny           bounded run for tests: the tiny preset, pp32 / tg16, 1 round
#     --arch A         make-model architecture of the files (default qwen2)
#     --preset P       make-model preset (default 0.5b; tiny with --tiny)
#     --dims D         make-model --dims overrides (e.g. layers=2); they go into the file names
#     --base T         make-model --type of the file llama-quantize starts from (default f32; f16
#                      halves big shapes). A --types entry naming it (Q8_0 with --base q8_0) is
#                      that file itself: gpt-oss files get MXFP4 experts from make-model only
#     --isa L          kamera (and --kamera-base) under KAMERA_ISA=L (e.g. avx2: an AVX-512 host
#                      capped to the AVX2 paths, against AVX2-only peer builds)
#     --ik DIR         an ik_llama.cpp build's bin folder: its llama-bench runs every measurement
#                      at -rtr 0 and at -rtr 1 (run-time repack), after the llama.cpp builds; the
#                      table adds both and kamera / the better of the two
#     --from-log FILE  run nothing: print the table of an earlier run's log (DIR/runs.jsonl)
#
# Every decode run is timed under /usr/bin/time: the table gives each engine's peak RSS beside
# the file's size (issue 27's bound: file + KV + 10%). The read floor is probed beside every
# decode run, and its reading moves with the host's load; the last column holds kamera's decode
# against the floor at the fastest read of the whole run, the strictest of the run's floors.
#
# Files: `kamera make-model --arch qwen2 --preset 0.5b --type f32 --seed 1` (or --arch, --preset,
# --dims, --base), then the first given build's `llama-quantize` that exists to each type (a
# missing file with no such build, or a failed quantize, stops the run). Without a llama.cpp
# build the kamera side runs alone (the files then come from `kamera make-model --type`, which
# writes F16 and Q8_0 only) and the script says so. Every measurement records the host's
# 1-minute load average (/proc/loadavg) just before it: the table gives their range.
set -euo pipefail

kamera=build/bin/kamera kamera_base= dir=/tmp/kamera-vs-llamacpp rounds=3 threads=2
types="Q8_0 Q4_K_M F16" preset=0.5b pp=512 tg=128 tiny=0 from_log=
arch=qwen2 dims= base=f32 isa= ik=
builds=()
while (($#)); do
  case "$1" in
    --kamera) kamera="$2"; shift 2 ;;
    --kamera-base) kamera_base="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --types) types="$2"; shift 2 ;;
    --tiny) tiny=1 preset=tiny pp=32 tg=16 rounds=1; shift ;;
    --arch) arch="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --dims) dims="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    --pp) pp="$2"; shift 2 ;;
    --tg) tg="$2"; shift 2 ;;
    --isa) isa="$2"; shift 2 ;;
    --ik) ik="$2"; shift 2 ;;
    --from-log) from_log="$2"; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0"; exit 0 ;;
    -*) echo "bench-vs-llamacpp: unknown option $1" >&2; exit 2 ;;
    *) builds+=("$1"); shift ;;
  esac
done
# --- the table: everything it needs is in the log ----------------------------------------------
table() {
  python3 - "$1" <<'EOF'
import json, os, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
kam = [r for r in runs if r["engine"] == "kamera"]
if not kam: sys.exit("bench-vs-llamacpp: no kamera run in " + sys.argv[1])
iks = ("ik-rtr0", "ik-rtr1")  # ik_llama.cpp (--ik) at -rtr 0 and 1
builds = list(dict.fromkeys(r["engine"] for r in runs
                            if r["engine"] not in ("kamera", "kamera-base") + iks))
has_ik = any(r["engine"] in iks for r in runs)
base = [r for r in runs if r["engine"] == "kamera-base"]
def length(test): return next((r["out"]["tokens"] for r in kam if r["test"] == test), "?")
pp, tg = length("pp"), length("tg")
rounds, threads = max(r["round"] for r in runs), kam[0]["out"]["threads"]
system = kam[0]["out"]["system"]
print(f"host: {system['cpu']}; features: {system['cpu_features']}; kamera ISA level: "
      f"{system['isa_level']}; {threads} threads; medians of {rounds} interleaved rounds")
# kamera's attention products run on OpenBLAS: say which kernel table (OPENBLAS_CORETYPE moves it).
print(f"kamera's f32 BLAS: {system['blas_path']}")
loads = [r["load1"] for r in runs if r.get("load1") is not None]
if loads: print(f"1-minute load average before each run: {min(loads):.2f} to {max(loads):.2f}")
if kam[0].get("isa"): print(f"kamera capped: KAMERA_ISA={kam[0]['isa']}")
if has_ik:
    ikb = next(r["binary"] for r in runs if r["engine"] in iks)
    commit = next((r["out"][0].get("build_commit", "?") for r in runs if r["engine"] in iks), "?")
    print(f"ik_llama.cpp: {ikb} ({commit})")
if base: print(f"kamera-base: {base[0]['binary']}")
floors = [r["out"]["read_floor"] for r in kam if r["test"] == "tg"]
best_gb = max((f["read_gb_per_s"] for f in floors), default=0.0)
def med(xs): return statistics.median(xs) if xs else float("nan")
def tps(r):
    if r["engine"] in ("kamera", "kamera-base"): return r["out"]["tokens_per_s"]
    return r["out"][0]["avg_ts"]
names = []
for b in builds:
    commit = next((r["out"][0].get("build_commit", "?") for r in runs if r["engine"] == b), "?")
    # A build from a plain source tree reports "unknown": name it by its folder instead.
    names.append(f"llama.cpp {commit}" if commit not in ("?", "unknown") else f"llama.cpp ({b})")
head = "| file | test | kamera tok/s |" + (" kamera-base tok/s | kamera / base |" if base else "")
head += "".join(f" {n} tok/s | ratio |" for n in names)
if has_ik: head += " ik -rtr 0 tok/s | ik -rtr 1 tok/s | kamera / better ik |"
head += " read floor tok/s (GB/s) | kamera / floor | peak RSS MB: kamera"
head += "".join(f", {n}" for n in names[:1]) + " (file MB)"
head += f" | kamera / floor at the run's fastest read ({best_gb:.1f} GB/s) |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
types = list(dict.fromkeys(r["type"] for r in runs))
for t in types:
    for test, label in (("pp", f"pp{pp}"), ("tg", f"tg{tg}")):
        sel = lambda e: [r for r in runs if r["engine"] == e and r["type"] == t and r["test"] == test]
        k = sel("kamera")
        kt = med([tps(r) for r in k])
        row = f"| {t} | {label} | {kt:.1f} |"
        if base:
            bt = med([tps(r) for r in sel("kamera-base")])
            row += f" {bt:.1f} | {kt / bt:.2f}x |"
        for b in builds:
            lt = med([tps(r) for r in sel(b)])
            row += f" {lt:.1f} | {kt / lt:.2f}x |"
        if has_ik:
            i0, i1 = (med([tps(r) for r in sel(e)]) for e in iks)
            row += f" {i0:.1f} | {i1:.1f} | {kt / max(i0, i1):.2f}x |"
        if test == "tg":
            fl = [r["out"]["read_floor"] for r in k]
            ft = med([f["floor_tokens_per_s"] for f in fl])
            gb = med([f["read_gb_per_s"] for f in fl])
            row += f" {ft:.1f} ({gb:.1f}) | {kt / ft:.2f} |"
            mb = lambda rs: med([r["rss_kb"] / 1024 for r in rs if r.get("rss_kb")])
            cells = [f"{mb(k):.0f}"] + [f"{mb(sel(b)):.0f}" for b in builds[:1]]
            path = k[0]["out"]["model"]["path"]  # gone when the log outlives its files
            size = os.path.getsize(path) / 2**20 if os.path.exists(path) else float("nan")
            best_tps = best_gb * 1e9 / fl[0]["weight_bytes_per_token"]
            row += f" {', '.join(cells)} ({size:.0f}) | {kt / best_tps:.2f} |"
        else:
            row += " – | – | – | – |"
        print(row)
EOF
}
if [[ -n "$from_log" ]]; then
  [[ -s "$from_log" ]] || { echo "bench-vs-llamacpp: no log at $from_log" >&2; exit 2; }
  table "$from_log"; exit 0
fi

if ((!tiny && rounds < 3)); then echo "bench-vs-llamacpp: --rounds must be >= 3" >&2; exit 2; fi
for b in "${builds[@]}" ${ik:+"$ik"}; do
  [[ -x "$b/llama-bench" ]] || { echo "bench-vs-llamacpp: no llama-bench in $b" >&2; exit 2; }
done
mkdir -p "$dir"
log="$dir/runs.jsonl"
: > "$log"

# --- the files -----------------------------------------------------------------------------
tag="$arch-$preset${dims:+-${dims//[,=]/}}"
dims_arg=(); [[ -z "$dims" ]] || dims_arg=(--dims "$dims")
lower() { echo "$1" | tr 'A-Z' 'a-z'; }
file_of() {
  if [[ "$(lower "$1")" == "$(lower "$base")" ]]; then echo "$dir/$tag-$base.gguf"
  else echo "$dir/$tag-$1.gguf"; fi
}
make_file() {  # type path
  [[ -s "$2" ]] || "$kamera" make-model --arch "$arch" --preset "$preset" "${dims_arg[@]}" \
    --type "$1" --seed 1 -o "$2" >/dev/null
}
src="$dir/$tag-$base.gguf"  # made only when a file is missing
quantize=""  # the first given llama.cpp build that has llama-quantize (ik's picks ik-only mixes)
for b in "${builds[@]}"; do
  [[ -x "$b/llama-quantize" ]] && { quantize="$b/llama-quantize"; break; }
done
quantize_to() {  # type path
  if [[ -z "$quantize" ]]; then
    echo "bench-vs-llamacpp: $2 is missing and no given build has llama-quantize to make it" >&2; exit 2
  fi
  make_file "$base" "$src"
  "$quantize" "$src" "$2" "$1" "$threads" >/dev/null 2>&1 ||
    { echo "bench-vs-llamacpp: $quantize failed to write $1 ($2)" >&2; rm -f "$2"; exit 2; }
}
made=()
for t in $types; do
  f=$(file_of "$t")
  if ((${#builds[@]})); then
    if [[ "$f" == "$src" ]]; then make_file "$base" "$src"
    elif [[ ! -s "$f" ]]; then quantize_to "$t" "$f"
    fi
  else
    case "$(lower "$t")" in
      f16|q8_0) make_file "$(lower "$t")" "$f" ;;
      *) echo "skipped $t: kamera make-model cannot write it and no llama.cpp build was given" >&2
         continue ;;
    esac
  fi
  made+=("$t")
done
if ((${#builds[@]} == 0)); then
  echo "no llama.cpp build given: kamera side only (no ratios)" >&2
fi

# --- the runs: one JSON line per measurement -------------------------------------------------
record() {  # engine type test round json [peak-rss-kb]
  python3 -c 'import json,sys; print(json.dumps({"engine": sys.argv[1], "type": sys.argv[2],
    "test": sys.argv[3], "round": int(sys.argv[4]), "out": json.loads(sys.argv[5]),
    "binary": sys.argv[6], "load1": float(sys.argv[7]), "isa": sys.argv[8] or None,
    "rss_kb": int(sys.argv[9]) if len(sys.argv) > 9 else None}))' \
    "$1" "$2" "$3" "$4" "$5" "$bin" "$load1" "$6" "${@:7}" >> "$log"
}
rss="$dir/peak-rss.txt"
peak() { tail -n 1 "$rss"; }  # the last line of /usr/bin/time -f %M -o
load_now() { read -r load1 _ </proc/loadavg; }
kenv=(env); [[ -z "$isa" ]] || kenv+=("KAMERA_ISA=$isa")  # kamera's runs, capped or not
run_kamera() {  # type test round [engine binary]
  local f e=${4:-kamera}; f=$(file_of "$1"); load_now; bin=${5:-$kamera}
  if [[ "$2" == pp ]]; then
    out=$("${kenv[@]}" "$bin" bench prefill -m "$f" --tokens "$pp" --reps 1 -t "$threads" --json)
  else
    out=$(/usr/bin/time -f %M -o "$rss" "${kenv[@]}" "$bin" bench decode -m "$f" --tokens "$tg" \
      --ctx 1 --reps 1 -t "$threads" --json)
    record "$e" "$1" "$2" "$3" "$out" "$isa" "$(peak)"
    return
  fi
  record "$e" "$1" "$2" "$3" "$out" "$isa"
}
run_llama() {  # build type test round [engine extra-args...]
  local f e=${5:-$1}; f=$(file_of "$2"); load_now; bin="$1/llama-bench"
  if [[ "$3" == pp ]]; then a=(-p "$pp" -n 0); else a=(-p 0 -n "$tg"); fi
  out=$(/usr/bin/time -f %M -o "$rss" "$1/llama-bench" -m "$f" -t "$threads" "${a[@]}" -r 1 \
    "${@:6}" -o json 2>/dev/null)
  record "$e" "$2" "$3" "$4" "$out" "" "$(peak)"
}
for ((r = 1; r <= rounds; ++r)); do
  for t in "${made[@]}"; do
    for test in pp tg; do
      echo "round $r/$rounds: $t $test" >&2
      run_kamera "$t" "$test" "$r"
      [[ -z "$kamera_base" ]] || run_kamera "$t" "$test" "$r" kamera-base "$kamera_base"
      for b in "${builds[@]}"; do run_llama "$b" "$t" "$test" "$r"; done
      [[ -z "$ik" ]] || for rtr in 0 1; do run_llama "$ik" "$t" "$test" "$r" "ik-rtr$rtr" -rtr "$rtr"; done
    done
  done
done

table "$log"
