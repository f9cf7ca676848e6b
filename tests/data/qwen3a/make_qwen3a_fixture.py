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
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fixture_gguf import byte_units, rnd, sinusoids  # noqa: E402,F401 (importable from here)
import fixture_gguf as fg  # noqa: E402

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
    """256 byte tokens, a few merges, then Qwen3's chat, audio and vision tokens (control)."""
    return fg.bpe_vocabulary(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>",
                              "<|audio_end|>", "<|audio_pad|>", "<|vision_start|>",
                              "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"])


def conv_tensors(w, rng):
    c, d = A["conv"], A["dim"]
    # Conv2d weights (out, in, kh, kw) as f16; biases unsqueezed to (out, 1, 1)
    for i, cin in ((1, 1), (2, c), (3, c)):
        w.add_tensor(f"a.conv2d.{i}.weight", rnd(rng, (c, cin, 3, 3), "w", 9 * cin).astype(np.float16))
        w.add_tensor(f"a.conv2d.{i}.bias", rnd(rng, (c, 1, 1), "b"))
    f = c * (A["mels"] // 8)  # channels x mel bins after three stride-2 convolutions
    w.add_tensor("a.conv_out.weight", rnd(rng, (d, f), "w", f).astype(np.float16))  # no bias


def audio_tensors(w, rng):
    d = A["dim"]
    conv_tensors(w, rng)
    w.add_tensor("a.position_embd.weight", sinusoids(A["n_pos"], d))
    fg.whisper_layers(w, rng, A, k_bias=True)  # q / k / v / out_proj all biased
    fg.linear(w, rng, "mm.a.mlp.1", d, d)  # proj1
    fg.linear(w, rng, "mm.a.mlp.2", T["dim"], d)  # proj2


def write_mmproj(path, rng):
    w = fg.mmproj_writer(path)
    # MmprojModel.set_gguf_parameters (the audio encoder only), Qwen25AudioModel's, then
    # Qwen3OmniMmprojModel's audio projector type
    fg.audio_keys(w, T["dim"], A)
    fg.add_keys(w, audio_num_mel_bins=A["mels"], audio_attention_layernorm_eps=A["eps"],
                clip_audio_projector_type=gguf.VisionProjectorType.QWEN3A)
    audio_tensors(w, rng)
    fg.finish(w)


def decoder_keys(w, tokens, types, merges):
    # Qwen3VLTextModel's order (the block count first)
    fg.add_keys(w, name="kamera tiny Qwen3-ASR thinker", file_type=gguf.LlamaFileType.ALL_F32,
                block_count=T["layers"], context_length=T["ctx"], embedding_length=T["dim"],
                feed_forward_length=T["ffn"], head_count=T["heads"], head_count_kv=T["kv_heads"],
                rope_dimension_sections=T["sections"], rope_freq_base=T["theta"],
                layer_norm_rms_eps=T["eps"], key_length=T["head_dim"], value_length=T["head_dim"],
                num_deepstack_layers=0)
    fg.bpe_tokenizer_keys(w, (tokens, types, merges), "qwen2", bos="<|im_end|>", eos="<|im_end|>",
                          pad="<|endoftext|>", vocab_size=False)
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
    n_vocab, hd = len(tokens), T["head_dim"]
    w = gguf.GGUFWriter(path, "qwen3vl")
    decoder_keys(w, tokens, types, merges)
    fg.decoder_tensors(w, rng, n_vocab, T, hd, qk_norm=True)
    fg.finish(w)


def sound(rate, seconds):
    """A chirp with two harmonics and a slow beat, peak about 0.6."""
    return fg.chirp(rate, seconds, sweep=60)


def write_wav(path, rate, seconds):
    fg.write_wav(path, sound(rate, seconds), rate)


def main():
    fg.run(SEED, write_mmproj, write_decoder, [
        ("clip_16k.wav", lambda p: write_wav(p, 16000, 8.5))])


if __name__ == "__main__":
    main()
