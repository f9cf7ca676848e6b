"""Writes a tiny random Qwen3-ASR pair with llama.cpp's gguf-py, in the layout its converter
writes (conversion/qwen3vl.py: Qwen3ASRMmprojModel, an audio-only mmproj with
clip.audio.projector_type "qwen3a"; Qwen3ASRTextModel, the thinker's text model as a qwen3vl
decoder), and a WAV clip:

  the mmproj        MmprojModel's and Qwen25AudioModel's keys (clip.has_audio_encoder,
                    clip.audio.*, no clip.projector_type), then clip.audio.projector_type; the
                    tower: three Conv2d (k 3, stride 2, pad 1) conv2d1..3 -> a.conv2d.{1,2,3}
                    (weights f16 as Qwen25AudioModel.tensor_force_quant writes every ".conv"
                    weight, biases unsqueezed to (C, 1, 1)), conv_out -> a.conv_out.weight (f16,
                    no bias), the 1500-row sinusoid table the converter generates
                    (a.position_embd.weight), pre-LN layers (self_attn_layer_norm -> ln1,
                    q / k / v / out_proj with biases -> attn_q / attn_k / attn_v / attn_out,
                    final_layer_norm -> ln2, fc1 / fc2 -> ffn_up / ffn_down), ln_post -> a.post_ln,
                    proj1 / proj2 -> mm.a.mlp.1 / mm.a.mlp.2; 128 mel bins
  the decoder       qwen3vl (Qwen3VLTextModel: qwen3 layers with q / k RMSNorm, interleaved M-RoPE
                    sections [3, 3, 2, 0] over head_dim 16, n_deepstack_layers 0, the ChatML
                    template Qwen3ASRTextModel writes, bos = eos = <|im_end|>), a byte-level BPE
                    vocabulary with Qwen3's <|audio_start|> / <|audio_end|> / <|audio_pad|>
  clip_16k.wav      8.5 s at 16 kHz, mono 16-bit PCM (so neither side resamples): 851 mel frames,
                    two 800-frame windows in llama.cpp's mtmd (8 chunks of 100, then 1)

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_qwen3a_fixture.py OUT_DIR

writes OUT_DIR/mmproj.gguf, OUT_DIR/decoder.gguf and OUT_DIR/clip_16k.wav; the same bytes on every
run (tests/data/qwen3a/README.md).
"""
import os
import struct
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../qwen25o"))
from make_qwen25o_fixture import byte_units, rnd, sinusoids  # noqa: E402

# The tower: width 32, 2 layers, 4 heads, MLP 48, 128 mel bins, 8 conv channels
# (downsample_hidden_size), projected to the decoder's 64 (proj1 32 -> 32, proj2 32 -> 64).
A = dict(dim=32, layers=2, heads=4, ffn=48, mels=128, conv=8, eps=1e-5, n_pos=1500)
# The decoder: qwen3vl of width 64, 2 layers, 4 heads of 16 on 2 KV heads, MLP 96, tied output.
T = dict(dim=64, layers=2, heads=4, kv_heads=2, head_dim=16, ffn=96, ctx=4096, eps=1e-6,
         theta=1000000.0, sections=[3, 3, 2, 0])
SEED = 23
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\\n' }}{% endif %}")


def vocabulary():
    """256 byte tokens, a few merges, then Qwen3's chat, audio and vision tokens."""
    u = byte_units()
    tokens = [u[b] for b in range(256)]
    types = [1] * 256
    merges = []
    for a, b in [("Ċ", "Ċ"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]:
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        types.append(1)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>",
                "<|audio_pad|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                "<|video_pad|>"]
    for s in specials:
        tokens.append(s)
        types.append(3)  # control
    while len(tokens) % 8:
        tokens.append(f"<pad_{len(tokens)}>")
        types.append(4)
    return tokens, types, merges


def conv_tensors(w, rng):
    c, d = A["conv"], A["dim"]
    # Conv2d weights (out, in, kh, kw) as f16; biases unsqueezed to (out, 1, 1)
    for i, cin in ((1, 1), (2, c), (3, c)):
        w.add_tensor(f"a.conv2d.{i}.weight", rnd(rng, (c, cin, 3, 3), "w", 9 * cin).astype(np.float16))
        w.add_tensor(f"a.conv2d.{i}.bias", rnd(rng, (c, 1, 1), "b"))
    f = c * (A["mels"] // 8)  # channels x mel bins after three stride-2 convolutions
    w.add_tensor("a.conv_out.weight", rnd(rng, (d, f), "w", f).astype(np.float16))  # no bias


def audio_tensors(w, rng):
    d, f = A["dim"], A["ffn"]
    conv_tensors(w, rng)
    w.add_tensor("a.position_embd.weight", sinusoids(A["n_pos"], d))
    for i in range(A["layers"]):
        b = f"a.blk.{i}."
        w.add_tensor(b + "ln1.weight", rnd(rng, (d,), "n"))  # self_attn_layer_norm
        w.add_tensor(b + "ln1.bias", rnd(rng, (d,), "b"))
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):  # q / k / v / out_proj, biased
            w.add_tensor(b + n + ".weight", rnd(rng, (d, d), "w", d))
            w.add_tensor(b + n + ".bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ln2.weight", rnd(rng, (d,), "n"))  # final_layer_norm
        w.add_tensor(b + "ln2.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (f, d), "w", d))  # fc1
        w.add_tensor(b + "ffn_up.bias", rnd(rng, (f,), "b"))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, f), "w", f))  # fc2
        w.add_tensor(b + "ffn_down.bias", rnd(rng, (d,), "b"))
    w.add_tensor("a.post_ln.weight", rnd(rng, (d,), "n"))  # ln_post
    w.add_tensor("a.post_ln.bias", rnd(rng, (d,), "b"))
    w.add_tensor("mm.a.mlp.1.weight", rnd(rng, (d, d), "w", d))  # proj1
    w.add_tensor("mm.a.mlp.1.bias", rnd(rng, (d,), "b"))
    w.add_tensor("mm.a.mlp.2.weight", rnd(rng, (T["dim"], d), "w", d))  # proj2
    w.add_tensor("mm.a.mlp.2.bias", rnd(rng, (T["dim"],), "b"))


def write_mmproj(path, rng):
    w = gguf.GGUFWriter(path, "clip")
    # MmprojModel.set_gguf_parameters (the audio encoder only), Qwen25AudioModel's, then
    # Qwen3OmniMmprojModel's audio projector type
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_has_audio_encoder(True)
    w.add_audio_projection_dim(T["dim"])
    w.add_audio_embedding_length(A["dim"])
    w.add_audio_feed_forward_length(A["ffn"])
    w.add_audio_block_count(A["layers"])
    w.add_audio_head_count(A["heads"])
    w.add_audio_num_mel_bins(A["mels"])
    w.add_audio_attention_layernorm_eps(A["eps"])
    w.add_clip_audio_projector_type(gguf.VisionProjectorType.QWEN3A)
    audio_tensors(w, rng)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def decoder_keys(w, tokens, types, merges):
    w.add_name("kamera tiny Qwen3-ASR thinker")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_block_count(T["layers"])
    w.add_context_length(T["ctx"])
    w.add_embedding_length(T["dim"])
    w.add_feed_forward_length(T["ffn"])
    w.add_head_count(T["heads"])
    w.add_head_count_kv(T["kv_heads"])
    w.add_rope_dimension_sections(T["sections"])
    w.add_rope_freq_base(T["theta"])
    w.add_layer_norm_rms_eps(T["eps"])
    w.add_key_length(T["head_dim"])
    w.add_value_length(T["head_dim"])
    w.add_num_deepstack_layers(0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|im_end|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)


def attention_tensors(w, rng, b):
    """A qwen3 layer's attention (q / k RMSNorm) and its FFN norm, block prefix b."""
    d, hd = T["dim"], T["head_dim"]
    q, kv = T["heads"] * hd, T["kv_heads"] * hd
    w.add_tensor(b + "attn_norm.weight", rnd(rng, (d,), "n"))
    w.add_tensor(b + "attn_q.weight", rnd(rng, (q, d), "w", d))
    w.add_tensor(b + "attn_k.weight", rnd(rng, (kv, d), "w", d))
    w.add_tensor(b + "attn_v.weight", rnd(rng, (kv, d), "w", d))
    w.add_tensor(b + "attn_q_norm.weight", rnd(rng, (hd,), "n"))
    w.add_tensor(b + "attn_k_norm.weight", rnd(rng, (hd,), "n"))
    w.add_tensor(b + "attn_output.weight", rnd(rng, (d, q), "w", q))
    w.add_tensor(b + "ffn_norm.weight", rnd(rng, (d,), "n"))


def write_decoder(path, rng):
    tokens, types, merges = vocabulary()
    n_vocab, d = len(tokens), T["dim"]
    w = gguf.GGUFWriter(path, "qwen3vl")
    decoder_keys(w, tokens, types, merges)
    w.add_tensor("token_embd.weight", rnd(rng, (n_vocab, d), "w", 3))
    for i in range(T["layers"]):
        b = f"blk.{i}."
        attention_tensors(w, rng, b)
        w.add_tensor(b + "ffn_gate.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (T["ffn"], d), "w", d))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, T["ffn"]), "w", T["ffn"]))
    w.add_tensor("output_norm.weight", rnd(rng, (d,), "n"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sound(rate, seconds):
    """A chirp with two harmonics and a slow beat, peak about 0.6."""
    t = np.arange(int(rate * seconds)) / rate
    phase = 2 * np.pi * (300 * t + 60 * t * t)
    x = 0.35 * np.sin(phase) + 0.15 * np.sin(2 * phase) + 0.08 * np.sin(3 * phase + 1.0)
    return x * (0.75 + 0.25 * np.cos(2 * np.pi * 1.5 * t))


def write_wav(path, rate, seconds):
    data = np.round(sound(rate, seconds) * 32767).astype("<i2").tobytes()
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16))
        f.write(b"data" + struct.pack("<I", len(data)) + data)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    write_mmproj(f"{out}/mmproj.gguf", np.random.default_rng(SEED))
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(SEED + 1))
    write_wav(f"{out}/clip_16k.wav", 16000, 8.5)


if __name__ == "__main__":
    main()
