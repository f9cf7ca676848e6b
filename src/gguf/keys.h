// The GGUF metadata keys kamera reads and writes, spelled as llama.cpp spells them (its
// gguf-py constants), in one place: the loaders (model/, tokenizer/, vision/) and the writers
// (synthetic/, tokenizer/, vision/) name the same constant, so a key read is the key written.
// Keys marked "kamera" are kamera's own (llama.cpp neither writes nor reads them).
//
// Three families:
//   general.*          the file's architecture, name and layout;
//   tokenizer.*        the embedded vocabulary and chat template;
//   clip.*             an mmproj file's vision tower (general.architecture = "clip");
// and the decoder's hyperparameters, "{arch}.{suffix}" (qwen2.block_count): the suffixes below,
// joined to the architecture name by arch_key().
#pragma once

#include <string>
#include <string_view>

namespace kamera::gguf_key {

// general.*
inline constexpr const char* kArchitecture = "general.architecture";
inline constexpr const char* kName = "general.name";
inline constexpr const char* kDescription = "general.description";
inline constexpr const char* kFileType = "general.file_type";
inline constexpr const char* kAlignment = "general.alignment";

// tokenizer.*
inline constexpr const char* kTokenizerModel = "tokenizer.ggml.model";  // "llama" | "gpt2"
inline constexpr const char* kTokenizerPre = "tokenizer.ggml.pre";
inline constexpr const char* kTokens = "tokenizer.ggml.tokens";
inline constexpr const char* kScores = "tokenizer.ggml.scores";
inline constexpr const char* kTokenType = "tokenizer.ggml.token_type";
inline constexpr const char* kMerges = "tokenizer.ggml.merges";
inline constexpr const char* kBosId = "tokenizer.ggml.bos_token_id";
inline constexpr const char* kEosId = "tokenizer.ggml.eos_token_id";
inline constexpr const char* kUnknownId = "tokenizer.ggml.unknown_token_id";
inline constexpr const char* kPaddingId = "tokenizer.ggml.padding_token_id";
inline constexpr const char* kEotId = "tokenizer.ggml.eot_token_id";
inline constexpr const char* kEomId = "tokenizer.ggml.eom_token_id";
inline constexpr const char* kAddBos = "tokenizer.ggml.add_bos_token";
inline constexpr const char* kAddEos = "tokenizer.ggml.add_eos_token";
inline constexpr const char* kAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
inline constexpr const char* kChatTemplate = "tokenizer.chat_template";
// Named templates besides the default: their names, and "tokenizer.chat_template.{name}"
inline constexpr const char* kChatTemplates = "tokenizer.chat_templates";
inline constexpr const char* kChatTemplateRerank = "tokenizer.chat_template.rerank";

// clip.*: the tower as a whole
inline constexpr const char* kClipProjectorType = "clip.projector_type";
inline constexpr const char* kClipHasVisionEncoder = "clip.has_vision_encoder";
inline constexpr const char* kClipHasTextEncoder = "clip.has_text_encoder";
inline constexpr const char* kClipHasQwen2vlMerger = "clip.has_qwen2vl_merger";
inline constexpr const char* kClipUseGelu = "clip.use_gelu";
inline constexpr const char* kClipUseSilu = "clip.use_silu";

// clip.vision.*: its shape and image preprocessing
inline constexpr const char* kVisionImageSize = "clip.vision.image_size";
inline constexpr const char* kVisionPatchSize = "clip.vision.patch_size";
inline constexpr const char* kVisionEmbeddingLength = "clip.vision.embedding_length";
inline constexpr const char* kVisionBlockCount = "clip.vision.block_count";
inline constexpr const char* kVisionHeadCount = "clip.vision.attention.head_count";
inline constexpr const char* kVisionLayerNormEps = "clip.vision.attention.layer_norm_epsilon";
inline constexpr const char* kVisionFeedForwardLength = "clip.vision.feed_forward_length";
inline constexpr const char* kVisionProjectionDim = "clip.vision.projection_dim";
inline constexpr const char* kVisionSpatialMergeSize = "clip.vision.spatial_merge_size";
inline constexpr const char* kVisionMergerLength = "clip.vision.merger_length";  // kamera
inline constexpr const char* kVisionImageMean = "clip.vision.image_mean";
inline constexpr const char* kVisionImageStd = "clip.vision.image_std";
inline constexpr const char* kVisionImageMinPixels = "clip.vision.image_min_pixels";
inline constexpr const char* kVisionImageMaxPixels = "clip.vision.image_max_pixels";
inline constexpr const char* kVisionWindowSize = "clip.vision.window_size";
inline constexpr const char* kVisionWaLayerIndexes = "clip.vision.wa_layer_indexes";
inline constexpr const char* kVisionNWaPattern = "clip.vision.n_wa_pattern";

// clip.audio.*: an audio encoder's shape (Whisper-style: Qwen2-Audio, Qwen2.5-Omni)
inline constexpr const char* kClipHasAudioEncoder = "clip.has_audio_encoder";
inline constexpr const char* kAudioProjectorType = "clip.audio.projector_type";
inline constexpr const char* kAudioNumMelBins = "clip.audio.num_mel_bins";
inline constexpr const char* kAudioEmbeddingLength = "clip.audio.embedding_length";
inline constexpr const char* kAudioFeedForwardLength = "clip.audio.feed_forward_length";
inline constexpr const char* kAudioProjectionDim = "clip.audio.projection_dim";
inline constexpr const char* kAudioBlockCount = "clip.audio.block_count";
inline constexpr const char* kAudioHeadCount = "clip.audio.attention.head_count";
inline constexpr const char* kAudioLayerNormEps = "clip.audio.attention.layer_norm_epsilon";

// {arch}.*: the decoder's hyperparameters, as suffixes of the architecture name
inline constexpr const char* kContextLength = "context_length";
inline constexpr const char* kEmbeddingLength = "embedding_length";
inline constexpr const char* kBlockCount = "block_count";
inline constexpr const char* kFeedForwardLength = "feed_forward_length";
inline constexpr const char* kVocabSize = "vocab_size";
inline constexpr const char* kHeadCount = "attention.head_count";
inline constexpr const char* kHeadCountKv = "attention.head_count_kv";
inline constexpr const char* kKeyLength = "attention.key_length";
inline constexpr const char* kValueLength = "attention.value_length";
inline constexpr const char* kRmsEps = "attention.layer_norm_rms_epsilon";
inline constexpr const char* kQLoraRank = "attention.q_lora_rank";
inline constexpr const char* kKvLoraRank = "attention.kv_lora_rank";
// MLA's per-head q/k and v widths in llama.cpp's current layout (model/deepseek2.h)
inline constexpr const char* kKeyLengthMla = "attention.key_length_mla";
inline constexpr const char* kValueLengthMla = "attention.value_length_mla";
inline constexpr const char* kRopeDimensionCount = "rope.dimension_count";
inline constexpr const char* kRopeDimensionSections = "rope.dimension_sections";
inline constexpr const char* kRopeMropeInterleaved = "rope.mrope_interleaved";  // kamera
inline constexpr const char* kRopeFreqBase = "rope.freq_base";
inline constexpr const char* kRopeScalingType = "rope.scaling.type";
inline constexpr const char* kRopeScalingFactor = "rope.scaling.factor";
inline constexpr const char* kRopeScalingOrigCtx = "rope.scaling.original_context_length";
inline constexpr const char* kRopeScalingAttnFactor = "rope.scaling.attn_factor";
inline constexpr const char* kRopeScalingYarnLogMul = "rope.scaling.yarn_log_multiplier";
inline constexpr const char* kRopeScalingYarnBetaFast = "rope.scaling.yarn_beta_fast";
inline constexpr const char* kRopeScalingYarnBetaSlow = "rope.scaling.yarn_beta_slow";
// {arch}.*: mixture of experts (deepseek2, qwen3moe)
inline constexpr const char* kLeadingDenseBlockCount = "leading_dense_block_count";
inline constexpr const char* kExpertFeedForwardLength = "expert_feed_forward_length";
inline constexpr const char* kExpertSharedFeedForwardLength = "expert_shared_feed_forward_length";
inline constexpr const char* kExpertCount = "expert_count";
inline constexpr const char* kExpertUsedCount = "expert_used_count";
inline constexpr const char* kExpertSharedCount = "expert_shared_count";
inline constexpr const char* kExpertWeightsScale = "expert_weights_scale";
inline constexpr const char* kExpertWeightsNorm = "expert_weights_norm";
inline constexpr const char* kExpertGatingFunc = "expert_gating_func";
inline constexpr const char* kExpertGroupCount = "expert_group_count";
inline constexpr const char* kExpertGroupUsedCount = "expert_group_used_count";
// {arch}.*: a reranker (model/rerank.h)
inline constexpr const char* kPoolingType = "pooling_type";
inline constexpr const char* kClassifierOutputLabels = "classifier.output_labels";
// {arch}.*: qwen3vl's deepstack (model/qwen3vl.h)
inline constexpr const char* kNumDeepstackLayers = "n_deepstack_layers";
inline constexpr const char* kDeepstackMapping = "deepstack_mapping";

// {arch}.*: per-layer attention kinds (gemma3; model/layer_kinds.h)
inline constexpr const char* kSlidingWindow = "attention.sliding_window";
inline constexpr const char* kSlidingWindowPattern = "attention.sliding_window_pattern";
inline constexpr const char* kRopeFreqBaseSwa = "rope.freq_base_swa";
inline constexpr const char* kFinalLogitSoftcapping = "final_logit_softcapping";
inline constexpr const char* kAttentionScale = "attention.scale";

// "{arch}.{suffix}": arch_key("qwen2", kBlockCount) is "qwen2.block_count".
inline std::string arch_key(std::string_view arch, std::string_view suffix) {
  std::string k;
  k.reserve(arch.size() + 1 + suffix.size());
  k.append(arch).append(1, '.').append(suffix);
  return k;
}

}  // namespace kamera::gguf_key
