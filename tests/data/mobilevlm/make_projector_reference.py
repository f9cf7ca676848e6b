"""Independent reference for kamera's MobileVLM projectors after their MLP (src/vision/llava_ldp.h):
MobileVLM V2's TokenDownLayer + PosInjectLayer and MobileVLM's two torchvision InvertedResidual
blocks (depthwise 3 x 3, LayerNorm, hardswish, squeeze-excitation with hardsigmoid, pointwise,
LayerNorm; the stride-1 block adds its input), written with numpy in float64 from those modules'
definitions, on a drawn 24 x 24 grid of 64-wide rows y[r, k] = sin(0.37 r + 0.11 k) (the test
draws the same) with the committed files' weights. Run by hand:

    cd tests/data/mobilevlm && PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_projector_reference.py

writes proj_ref_ldpv2.f32 and proj_ref_ldp.f32 (144 x 64 f32 each, raster order).
"""
import numpy as np
import gguf

SIDE, EPS = 24, 1e-5


def tensors(path):
    return {t.name: np.array(t.data, np.float64) for t in gguf.GGUFReader(path).tensors}


def drawn(c):
    r, k = np.mgrid[0:SIDE * SIDE, 0:c]
    return np.sin(0.37 * r + 0.11 * k).reshape(SIDE, SIDE, c)


def depthwise(x, k, stride):
    s, c = x.shape[0], x.shape[2]
    n = (s - 1) // stride + 1
    xp = np.zeros((s + 2, s + 2, c))
    xp[1:-1, 1:-1] = x
    out = np.zeros((n, n, c))
    for ky in range(3):
        for kx in range(3):
            out += k[:, ky, kx] * xp[ky:ky + stride * n:stride, kx:kx + stride * n:stride]
    return out


def layernorm(x, w, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + EPS) * w + b


def hardsigmoid(x):
    return np.clip(x + 3, 0, 6) / 6


def inverted_residual(x, t, b, stride):
    h = layernorm(depthwise(x, t[b + "0.0.weight"], stride), t[b + "0.1.weight"], t[b + "0.1.bias"])
    h = h * hardsigmoid(h)
    s = np.maximum(t[b + "1.fc1.weight"] @ h.mean((0, 1)) + t[b + "1.fc1.bias"], 0)
    h = h * hardsigmoid(t[b + "1.fc2.weight"] @ s + t[b + "1.fc2.bias"])
    h = layernorm(h @ t[b + "2.0.weight"].T, t[b + "2.1.weight"], t[b + "2.1.bias"])
    return h + x if stride == 1 else h


def main():
    t = tensors("mmproj.gguf")
    c = t["mm.model.peg.0.bias"].size
    y = drawn(c)
    p = y.reshape(SIDE // 2, 2, SIDE // 2, 2, c).mean((1, 3))
    z = p + t["mm.model.peg.0.bias"] + depthwise(p, t["mm.model.peg.0.weight"], 1)
    z.reshape(-1, c).astype("<f4").tofile("proj_ref_ldpv2.f32")
    t = tensors("mmproj_ldp.gguf")
    a = inverted_residual(y, t, "mm.model.mb_block.1.block.", 1)
    z = inverted_residual(a, t, "mm.model.mb_block.2.block.", 2)
    z.reshape(-1, c).astype("<f4").tofile("proj_ref_ldp.f32")


if __name__ == "__main__":
    main()
