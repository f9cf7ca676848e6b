"""What the tiny vision / audio fixture generators (tests/data/*/make_*_fixture.py) share: the
drawn tensors, the GPT-2 byte-level vocabulary, the PNG / WAV writers and the gguf-py key and tensor
runs that llama.cpp's converters write alike for clip towers and llama-style decoders.

Every function draws from the generator it is given in the order the generators always drew, so
the files they write keep their bytes (tests/data/*/README.md). Import it from a generator with

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import fixture_gguf as fg
"""
import struct
import sys
import zlib

import numpy as np
import gguf

CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
# The tokens a Qwen2-style byte-level vocabulary names (bpe_tokenizer_keys' keywords).
QWEN2_TOKENS = dict(pre="qwen2", bos="<|endoftext|>", eos="<|im_end|>", pad="<|endoftext|>")
BPE_MERGES = [("Ċ", "Ċ"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]


def rnd(rng, shape, kind, fan_in=1):
    """Uniform draws in f32: "n" a norm weight near 1, "b" a small bias, "p" a position or class
    embedding, "ls" an InternViT layer scale near 0.1, anything else a weight of that fan-in."""
    u = rng.uniform(-1.0, 1.0, size=shape)
    if kind == "n":
        return (1.0 + 0.1 * u).astype(np.float32)
    if kind == "b":
        return (0.05 * u).astype(np.float32)
    if kind == "p":
        return (0.5 * u).astype(np.float32)
    if kind == "ls":  # layer scales: InternViT initialises them at 0.1
        return (0.1 + 0.05 * u).astype(np.float32)
    return (np.sqrt(3.0 / fan_in) * u).astype(np.float32)


def byte_units():
    """GPT-2's byte -> printable unicode table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_vocabulary(specials):
    """256 byte tokens, BPE_MERGES, then `specials` (control when they start with "<|", else
    user-defined), padded to a multiple of 8: (tokens, types, merges)."""
    u = byte_units()
    tokens = [u[b] for b in range(256)]
    types = [1] * 256
    merges = []
    for a, b in BPE_MERGES:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(1)
    for s in specials:
        tokens.append(s)
        types.append(3 if s.startswith("<|") else 4)
    while len(tokens) % 8:
        tokens.append(f"<pad_{len(tokens)}>")
        types.append(4)
    return tokens, types, merges


def write_png(path, rgb):
    """An 8-bit RGB PNG of an (h, w, 3) array, no filtering, zlib level 9."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag, data):
        c = struct.pack(">I", len(data)) + tag + data
        return c + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def pattern(w, h, wave, ramp, stripe):
    """A smooth drawn picture with some texture: red 128 + 100 sin(x / a) cos(y / b) for wave
    (a, b), green a ramp 255 (i x + j y) / (i w + j h) for ramp (i, j), blue
    128 + 120 sin((k x - l y) / m) for stripe (k, l, m)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    (a, b), (i, j), (k, l, m) = wave, ramp, stripe
    r = 128 + 100 * np.sin(x / a) * np.cos(y / b)
    g = 255 * (i * x + j * y) / (i * w + j * h)
    bl = 128 + 120 * np.sin((k * x - l * y) / m)
    return np.clip(np.stack([r, g, bl], -1).round(), 0, 255).astype(np.uint8)


def chirp(rate, seconds, sweep):
    """A chirp from 300 Hz rising by 2 * sweep Hz a second, with two harmonics and a slow beat,
    peak about 0.6."""
    t = np.arange(int(rate * seconds)) / rate
    phase = 2 * np.pi * (300 * t + sweep * t * t)
    x = 0.35 * np.sin(phase) + 0.15 * np.sin(2 * phase) + 0.08 * np.sin(3 * phase + 1.0)
    return x * (0.75 + 0.25 * np.cos(2 * np.pi * 1.5 * t))


def write_wav(path, samples, rate, channels=1):
    """16-bit PCM WAV of samples in [-1, 1] (rounded to 32767 steps), the header naming
    `channels` channels."""
    data = np.round(samples * 32767).astype("<i2").tobytes()
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * 2 * channels,
                                      2 * channels, 16))
        f.write(b"data" + struct.pack("<I", len(data)) + data)


def sinusoids(length, channels, max_timescale=10000):
    """Qwen25AudioModel.generate_extra_tensors's table, in numpy."""
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2, dtype=np.float32))
    t = np.arange(length, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def finish(w):
    """Writes a GGUFWriter's header, keys and tensors, and closes it."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def mmproj_writer(path):
    """A clip GGUFWriter with MmprojModel's first keys (the mmproj type, all f32)."""
    w = gguf.GGUFWriter(path, "clip")
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    return w


def add_keys(w, **keys):
    """w.add_KEY(value) for each keyword, in the order given (a GGUF file keeps that order)."""
    for key, value in keys.items():
        getattr(w, "add_" + key)(value)


def vision_keys(w, text_dim, V, mean, std):
    """MmprojModel.set_gguf_parameters' vision keys for the tower V (image_size, patch, dim, ffn,
    layers, heads)."""
    add_keys(w, clip_has_vision_encoder=True, vision_projection_dim=text_dim,
             vision_image_size=V["image_size"], vision_patch_size=V["patch"],
             vision_embedding_length=V["dim"], vision_feed_forward_length=V["ffn"],
             vision_block_count=V["layers"], vision_head_count=V["heads"],
             vision_image_mean=mean, vision_image_std=std)


def audio_keys(w, text_dim, A):
    """MmprojModel.set_gguf_parameters' audio keys for the tower A (dim, ffn, layers, heads)."""
    add_keys(w, clip_has_audio_encoder=True, audio_projection_dim=text_dim,
             audio_embedding_length=A["dim"], audio_feed_forward_length=A["ffn"],
             audio_block_count=A["layers"], audio_head_count=A["heads"])


def siglip_tower(w, rng, V):
    """A SigLIP tower as SmolVLM's and Gemma 3's converters write it: the biased patch embedding,
    the (side^2, dim) position table, pre-LN layers with biased q / k / v / out and fc1 / fc2
    (ffn_up / ffn_down), post_ln. Torch's (out, in) shapes, in numpy order (GGUF's ne reversed)."""
    d, f, p = V["dim"], V["ffn"], V["patch"]
    side = V["image_size"] // p
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 3 * p * p))
    w.add_tensor("v.patch_embd.bias", rnd(rng, (d,), "b"))
    w.add_tensor("v.position_embd.weight", rnd(rng, (side * side, d), "p"))
    for i in range(V["layers"]):
        b = f"v.blk.{i}."
        for n in ("attn_q", "attn_k", "attn_v"):
            linear(w, rng, b + n, d, d)
        layernorm(w, rng, b + "ln1", d)
        linear(w, rng, b + "attn_out", d, d)
        layernorm(w, rng, b + "ln2", d)
        linear(w, rng, b + "ffn_up", f, d)  # mlp.fc1
        linear(w, rng, b + "ffn_down", d, f)  # mlp.fc2
    layernorm(w, rng, "v.post_ln", d)


def linear(w, rng, name, n_out, n_in):
    """A biased Linear(n_in, n_out): NAME.weight (n_out, n_in), then NAME.bias."""
    w.add_tensor(name + ".weight", rnd(rng, (n_out, n_in), "w", n_in))
    w.add_tensor(name + ".bias", rnd(rng, (n_out,), "b"))


def layernorm(w, rng, name, n):
    """A LayerNorm's NAME.weight (near 1), then NAME.bias."""
    w.add_tensor(name + ".weight", rnd(rng, (n,), "n"))
    w.add_tensor(name + ".bias", rnd(rng, (n,), "b"))


def whisper_layers(w, rng, A, k_bias):
    """A Whisper-style audio tower's pre-LN layers (self_attn_layer_norm -> ln1, q / k / v /
    out_proj, final_layer_norm -> ln2, fc1 / fc2 -> ffn_up / ffn_down; k_proj without a bias
    where k_bias is False), then ln_post -> a.post_ln."""
    d, f = A["dim"], A["ffn"]
    for i in range(A["layers"]):
        b = f"a.blk.{i}."
        layernorm(w, rng, b + "ln1", d)
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            if n == "attn_k" and not k_bias:
                w.add_tensor(b + n + ".weight", rnd(rng, (d, d), "w", d))
            else:
                linear(w, rng, b + n, d, d)
        layernorm(w, rng, b + "ln2", d)
        linear(w, rng, b + "ffn_up", f, d)
        linear(w, rng, b + "ffn_down", d, f)
    layernorm(w, rng, "a.post_ln", A["dim"])


def decoder_keys(w, name, T, rope=None):
    """LlamaModel-style hyperparameters of the decoder T (ctx, dim, layers, ffn, heads, kv_heads,
    theta, eps); rope(w), when given, writes the rope keys that follow."""
    add_keys(w, name=name, file_type=gguf.LlamaFileType.ALL_F32, context_length=T["ctx"],
             embedding_length=T["dim"], block_count=T["layers"], feed_forward_length=T["ffn"],
             head_count=T["heads"], head_count_kv=T["kv_heads"], rope_freq_base=T["theta"],
             layer_norm_rms_eps=T["eps"])
    if rope:
        rope(w)


def bpe_tokenizer_keys(w, vocab, pre, bos, eos, pad, unk=None, vocab_size=True):
    """A gpt2 (byte-level BPE) tokenizer's keys for vocab = (tokens, types, merges); bos / eos /
    pad / unk name tokens; add_bos false."""
    tokens, types, merges = vocab
    if vocab_size:
        w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index(bos))
    w.add_eos_token_id(tokens.index(eos))
    if unk is not None:
        w.add_unk_token_id(tokens.index(unk))
    w.add_pad_token_id(tokens.index(pad))
    w.add_add_bos_token(False)


def decoder_tensors(w, rng, n_vocab, T, hd, qkv_bias=False, qk_norm=False, post_norms=False,
                    embd_fan=3, output=False):
    """A llama-style decoder's tensors (token_embd drawn with fan-in embd_fan; per layer
    attn_norm, q / k / v with biases where qkv_bias, q / k RMSNorms where qk_norm, attn_output,
    Gemma's post-attention norm where post_norms, ffn_norm, gated MLP, Gemma's post-FFW norm;
    output_norm; an untied output where output)."""
    d, ffn = T["dim"], T["ffn"]
    w.add_tensor("token_embd.weight", rnd(rng, (n_vocab, d), "w", embd_fan))
    q, kv = T["heads"] * hd, T["kv_heads"] * hd
    for i in range(T["layers"]):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", rnd(rng, (d,), "n"))
        for n, rows in (("attn_q", q), ("attn_k", kv), ("attn_v", kv)):
            w.add_tensor(b + n + ".weight", rnd(rng, (rows, d), "w", d))
            if qkv_bias:
                w.add_tensor(b + n + ".bias", rnd(rng, (rows,), "b"))
        if qk_norm:
            w.add_tensor(b + "attn_q_norm.weight", rnd(rng, (hd,), "n"))
            w.add_tensor(b + "attn_k_norm.weight", rnd(rng, (hd,), "n"))
        w.add_tensor(b + "attn_output.weight", rnd(rng, (d, q), "w", q))
        if post_norms:
            w.add_tensor(b + "post_attention_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ffn_norm.weight", rnd(rng, (d,), "n"))
        w.add_tensor(b + "ffn_gate.weight", rnd(rng, (ffn, d), "w", d))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (ffn, d), "w", d))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, ffn), "w", ffn))
        if post_norms:
            w.add_tensor(b + "post_ffw_norm.weight", rnd(rng, (d,), "n"))
    w.add_tensor("output_norm.weight", rnd(rng, (d,), "n"))
    if output:
        w.add_tensor("output.weight", rnd(rng, (n_vocab, d), "w", d))


def write_bpe_decoder(path, rng, arch, name, T, vocab, tokens, rope=None, **tensors):
    """A llama-style decoder file of `arch` with a byte-level BPE vocabulary: decoder_keys (then
    rope(w)), bpe_tokenizer_keys(vocab, **tokens), decoder_tensors (head width dim / heads, the
    keyword options `tensors`)."""
    w = gguf.GGUFWriter(path, arch)
    decoder_keys(w, name, T, rope)
    bpe_tokenizer_keys(w, vocab, **tokens)
    decoder_tensors(w, rng, len(vocab[0]), T, T["dim"] // T["heads"], **tensors)
    finish(w)


def run(seed, write_mmproj, write_decoder, media):
    """A generator's command line, `make_X_fixture.py [OUT_DIR]` (default .): OUT_DIR/mmproj.gguf
    drawn from seed, OUT_DIR/decoder.gguf from seed + 1, then write(OUT_DIR/name) for each
    (name, write) of media."""
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(seed))
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(seed + 1))
    for name, write in media:
        write(f"{out}/{name}")
