"""Writes a tiny random Qwen3-Omni pair with llama.cpp's gguf-py, in the layout its converter
writes (conversion/qwen3vl.py: Qwen3OmniMmprojModel, one mmproj with both encoders; 
Qwen3OmniMoeTextModel, the thinker as a qwen3vlmoe decoder), and a WAV clip:

  the mmproj        MmprojModel's keys for both encoders, Qwen25AudioModel's, Qwen3VLVisionModel's
                    (clip.use_gelu, the merge size, the attention eps, clip.vision.is_deepstack_layers)
                    and then clip.vision.projector_type "qwen3vl_merger" and
                    clip.audio.projector_type "qwen3a" (no clip.projector_type)
  the vision half   Qwen3VLVisionModel's tensors: the Conv3D split into v.patch_embd.weight /
                    .weight.1 with its bias, v.position_embd (a 4 x 4 table), per layer ln1 / ln2
                    (LayerNorm), the fused attn_qkv, attn_out, ffn_up / ffn_down (linear_fc1 / 2),
                    v.post_ln (the merger's norm), mm.0 / mm.2 (the merger's fc1 / fc2); no
                    deepstack layers (with --deepstack: v.deepstack.0.*, which llama.cpp d32676d's
                    mtmd refuses beside the audio half: README.md)
  the audio half    ../qwen3a/make_qwen3a_fixture.py's tower (the same function, its own draws)
  the decoder       qwen3vlmoe (Qwen3VLMoeTextModel over Qwen3MoeModel: q / k RMSNorm, 8 experts,
                    2 used, ffn_gate_inp / ffn_{gate,up,down}_exps, interleaved M-RoPE sections
                    [3, 3, 2, 0], n_deepstack_layers 0 as Qwen3OmniMoeTextModel writes, bos = eos =
                    <|im_end|>), ../qwen3a's vocabulary (Qwen3's audio and vision tokens)
  clip_16k.wav      2 s at 16 kHz, mono 16-bit PCM (one 800-frame window: 201 frames, 39 rows)

    PYTHONPATH=/tmp/llama-ref/gguf-py /usr/bin/python3 make_qwen3omni_fixture.py OUT_DIR [--deepstack]

writes OUT_DIR/mmproj.gguf (--deepstack: OUT_DIR/mmproj_deepstack.gguf), OUT_DIR/decoder.gguf and
OUT_DIR/clip_16k.wav; the same bytes on every run (tests/data/qwen3omni/README.md).
"""
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../qwen3a"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../qwen25o"))
import make_qwen3a_fixture as q3a  # noqa: E402
from make_qwen25o_fixture import rnd  # noqa: E402

A = q3a.A  # the audio tower: width 32, 2 layers, 4 heads, MLP 48, 128 mel bins, 8 conv channels
# The vision half: width 32, 2 layers, 2 heads, MLP 48, patch 16, merge 2, a 4 x 4 position table
# (image_size 64, as the converter derives it from num_position_embeddings 16).
V = dict(dim=32, layers=2, heads=2, ffn=48, patch=16, merge=2, n_pos=16, eps=1e-6)
# The thinker: qwen3vlmoe of width 64, 2 layers, 4 heads of 16 on 2 KV heads, 8 experts of 32
# (2 used), tied output.
T = dict(q3a.T, experts=8, experts_used=2, expert_ffn=32)
SEED = 31
HALF = [0.5, 0.5, 0.5]  # Qwen3-VL's processor mean and std


def vision_tensors(w, rng, deepstack):
    d, f, p, mw = V["dim"], V["ffn"], V["patch"], 4 * V["dim"]
    w.add_tensor("v.patch_embd.weight", rnd(rng, (d, 3, p, p), "w", 6 * p * p))
    w.add_tensor("v.patch_embd.weight.1", rnd(rng, (d, 3, p, p), "w", 6 * p * p))
    w.add_tensor("v.patch_embd.bias", rnd(rng, (d,), "b"))
    w.add_tensor("v.position_embd.weight", rnd(rng, (V["n_pos"], d), "w", 3))
    for i in range(V["layers"]):
        b = f"v.blk.{i}."
        w.add_tensor(b + "ln1.weight", rnd(rng, (d,), "n"))  # norm1
        w.add_tensor(b + "ln1.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "attn_qkv.weight", rnd(rng, (3 * d, d), "w", d))  # attn.qkv
        w.add_tensor(b + "attn_qkv.bias", rnd(rng, (3 * d,), "b"))
        w.add_tensor(b + "attn_out.weight", rnd(rng, (d, d), "w", d))  # attn.proj
        w.add_tensor(b + "attn_out.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ln2.weight", rnd(rng, (d,), "n"))  # norm2
        w.add_tensor(b + "ln2.bias", rnd(rng, (d,), "b"))
        w.add_tensor(b + "ffn_up.weight", rnd(rng, (f, d), "w", d))  # mlp.linear_fc1
        w.add_tensor(b + "ffn_up.bias", rnd(rng, (f,), "b"))
        w.add_tensor(b + "ffn_down.weight", rnd(rng, (d, f), "w", f))  # mlp.linear_fc2
        w.add_tensor(b + "ffn_down.bias", rnd(rng, (d,), "b"))
    if deepstack:  # merger_list.0 after layer 0: norm over the merged width, fc1, fc2
        b = "v.deepstack.0."
        w.add_tensor(b + "norm.weight", rnd(rng, (mw,), "n"))
        w.add_tensor(b + "norm.bias", rnd(rng, (mw,), "b"))
        w.add_tensor(b + "fc1.weight", rnd(rng, (mw, mw), "w", mw))
        w.add_tensor(b + "fc1.bias", rnd(rng, (mw,), "b"))
        w.add_tensor(b + "fc2.weight", rnd(rng, (T["dim"], mw), "w", mw))
        w.add_tensor(b + "fc2.bias", rnd(rng, (T["dim"],), "b"))
    w.add_tensor("v.post_ln.weight", rnd(rng, (d,), "n"))  # merger.norm (ln_q)
    w.add_tensor("v.post_ln.bias", rnd(rng, (d,), "b"))
    w.add_tensor("mm.0.weight", rnd(rng, (mw, mw), "w", mw))  # merger.mlp.0
    w.add_tensor("mm.0.bias", rnd(rng, (mw,), "b"))
    w.add_tensor("mm.2.weight", rnd(rng, (T["dim"], mw), "w", mw))  # merger.mlp.2
    w.add_tensor("mm.2.bias", rnd(rng, (T["dim"],), "b"))


def mmproj_keys(w, deepstack):
    # MmprojModel.set_gguf_parameters (both encoders), Qwen25AudioModel's, Qwen3VLVisionModel's,
    # then Qwen3OmniMmprojModel's two projector types (its second pass over the audio keys
    # rewrites the same values)
    w.add_type(gguf.GGUFType.MMPROJ)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_clip_has_vision_encoder(True)
    w.add_vision_projection_dim(T["dim"])
    w.add_vision_image_size(int(V["n_pos"] ** 0.5) * V["patch"])
    w.add_vision_patch_size(V["patch"])
    w.add_vision_embedding_length(V["dim"])
    w.add_vision_feed_forward_length(V["ffn"])
    w.add_vision_block_count(V["layers"])
    w.add_vision_head_count(V["heads"])
    w.add_vision_image_mean(HALF)
    w.add_vision_image_std(HALF)
    w.add_clip_has_audio_encoder(True)
    w.add_audio_projection_dim(T["dim"])
    w.add_audio_embedding_length(A["dim"])
    w.add_audio_feed_forward_length(A["ffn"])
    w.add_audio_block_count(A["layers"])
    w.add_audio_head_count(A["heads"])
    w.add_audio_num_mel_bins(A["mels"])
    w.add_audio_attention_layernorm_eps(A["eps"])
    w.add_vision_use_gelu(True)
    w.add_vision_spatial_merge_size(V["merge"])
    w.add_vision_attention_layernorm_eps(V["eps"])
    w.add_vision_is_deepstack_layers([deepstack and i == 0 for i in range(V["layers"])])
    w.add_clip_vision_projector_type(gguf.VisionProjectorType.QWEN3VL)
    w.add_clip_audio_projector_type(gguf.VisionProjectorType.QWEN3A)


def write_mmproj(path, deepstack):
    w = gguf.GGUFWriter(path, "clip")
    mmproj_keys(w, deepstack)
    vision_tensors(w, np.random.default_rng(SEED), deepstack)
    q3a.audio_tensors(w, np.random.default_rng(SEED + 1))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_decoder(path, rng):
    tokens, types, merges = q3a.vocabulary()
    n_vocab, d = len(tokens), T["dim"]
    n_exp, e_ff = T["experts"], T["expert_ffn"]
    w = gguf.GGUFWriter(path, "qwen3vlmoe")
    q3a.decoder_keys(w, tokens, types, merges)  # Qwen3OmniMoeTextModel: n_deepstack_layers 0
    w.remove_key("general.name")
    w.add_name("kamera tiny Qwen3-Omni thinker")
    w.add_expert_count(n_exp)
    w.add_expert_used_count(T["experts_used"])
    w.add_expert_feed_forward_length(e_ff)
    w.add_tensor("token_embd.weight", rnd(rng, (n_vocab, d), "w", 3))
    for i in range(T["layers"]):
        b = f"blk.{i}."
        q3a.attention_tensors(w, rng, b)
        w.add_tensor(b + "ffn_gate_inp.weight", rnd(rng, (n_exp, d), "w", d))  # the router
        w.add_tensor(b + "ffn_gate_exps.weight", rnd(rng, (n_exp, e_ff, d), "w", d))
        w.add_tensor(b + "ffn_up_exps.weight", rnd(rng, (n_exp, e_ff, d), "w", d))
        w.add_tensor(b + "ffn_down_exps.weight", rnd(rng, (n_exp, d, e_ff), "w", e_ff))
    w.add_tensor("output_norm.weight", rnd(rng, (d,), "n"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = args[0] if args else "."
    if "--deepstack" in sys.argv:
        write_mmproj(f"{out}/mmproj_deepstack.gguf", True)
        return
    write_mmproj(f"{out}/mmproj.gguf", False)
    write_decoder(f"{out}/decoder.gguf", np.random.default_rng(SEED + 2))
    q3a.write_wav(f"{out}/clip_16k.wav", 16000, 2.0)


if __name__ == "__main__":
    main()
