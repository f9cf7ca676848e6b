#!/usr/bin/env python3
# Writes the dequantization fixtures of tests/unit/ops/test_quant_ref.cpp: for each weight type,
# <type>.blocks holds random blocks (the scale fields set to finite f16 values) and <type>.f32 the
# values llama.cpp's gguf-py (an implementation independent of kamera's) dequantizes them to.
#
# Produced with llama.cpp's gguf-py at commit c392e50 (mxfp4, added last, at d32676d:
# PYTHONPATH=/tmp/llama-ref/gguf-py; the other types' files come out the same bytes):
#   PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 tests/data/quant/make_fixtures.py \
#     tests/data/quant
# (Debian's python3-numpy 1.24.2).
import sys
import types
from pathlib import Path

import numpy as np

# gguf-py's package imports its tokenizer module, which needs sentencepiece; quants.py does not.
sys.modules.setdefault("sentencepiece", types.SimpleNamespace(SentencePieceProcessor=None))
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

# (type, number of blocks, byte offsets of the f16 scale fields within a block)
CASES = [
    (T.Q4_0, 6, [0]),
    (T.Q4_1, 6, [0, 2]),
    (T.Q5_0, 6, [0]),
    (T.Q5_1, 6, [0, 2]),
    (T.Q8_0, 6, [0]),
    (T.IQ4_NL, 6, [0]),
    (T.Q2_K, 3, [80, 82]),
    (T.Q3_K, 3, [108]),
    (T.Q4_K, 3, [0, 2]),
    (T.Q5_K, 3, [0, 2]),
    (T.Q6_K, 3, [208]),
    (T.IQ4_XS, 3, [0]),
    (T.F16, 96, []),
    (T.BF16, 96, []),
    (T.MXFP4, 6, []),  # its E8M0 scale byte is set below (added last: the others stay as made)
]


def main(out: Path) -> None:
    rng = np.random.default_rng(13)
    for qtype, n_blocks, scale_offsets in CASES:
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
        for b in range(n_blocks):
            for off in scale_offsets:
                # mostly normal scales; block 1 gets a subnormal one, block 2 a zero one
                v = [rng.uniform(-0.5, 0.5), 3e-6, 0.0][min(b, 2)] if b in (1, 2) else rng.uniform(-0.5, 0.5)
                raw[b, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
        if qtype == T.MXFP4:
            # exponents around 2^0 and subnormal half scales: block 1 e = 0, block 2 e = 1
            raw[:, 0] = rng.integers(110, 140, size=n_blocks, dtype=np.uint8)
            raw[1, 0], raw[2, 0] = 0, 1
        if qtype in (T.F16, T.BF16):
            # random bit patterns, but no NaN or infinity (their payloads are not the point here)
            words = raw.reshape(-1).view(np.uint16)
            exp_mask, exp_top = (0x7C00, 0x7C00) if qtype == T.F16 else (0x7F80, 0x7F80)
            words[(words & exp_mask) == exp_top] &= np.uint16(0xBFFF)
        values = dequantize(raw.reshape(-1), qtype).astype(np.float32)
        assert values.size == n_blocks * block_size and np.all(np.isfinite(values))
        name = qtype.name.lower()
        (out / f"{name}.blocks").write_bytes(raw.tobytes())
        (out / f"{name}.f32").write_bytes(values.astype("<f4").tobytes())
        print(f"{name}: {n_blocks} blocks, {values.size} values")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
