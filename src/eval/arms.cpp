#include "eval/arms.h"

namespace kamera {

PatchOptions harness_patch_options(const Model& model, int rank, const LayerSet& layers,
                                   DType dtype, bool per_head, SvdMethod method) {
  PatchOptions po;
  po.rank = rank;
  po.layers = layers;
  po.method = method;
  po.dtype = dtype;
  po.per_head = per_head;
  po.head_dim = model.cfg.head_dim;
  po.cap_rank = true;  // rank capped at min(n, width) of each factored block
  return po;
}

Status place_reused(const PreparedItem& it, SeqId seq, const std::vector<Patch>* patches) {
  ChunkCache& cc = it.ctx->cache();
  for (size_t i = 0; i < it.reused.size(); ++i) {
    const ReusedChunk& r = it.reused[i];
    KAMERA_TRY(cc.append_chunk(seq, *r.canon, patches ? &(*patches)[i] : nullptr, r.position));
  }
  return Status::Ok();
}

Result<ArmBuild> BlindArm::build(const PreparedItem& it, SeqId seq) {
  KAMERA_TRY(place_reused(it, seq, nullptr));
  ArmBuild b;
  for (const ReusedChunk& r : it.reused) b.served.push_back(r.canon->kv);
  return b;
}

Result<bool> PatchArm::prepare(const PreparedItem& it) {
  patches_.clear();
  PatchOptions o = opts_;  // factors no wider than the pool (as ChunkCache stores them)
  if (o.dtype == DType::F32) o.dtype = it.ctx->pool().dtype();
  for (const ReusedChunk& r : it.reused) {
    KAMERA_ASSIGN_OR_RETURN(Patch p, form_patch(r.cond, r.canon->kv, o));
    patches_.push_back(std::move(p));
  }
  return true;
}

namespace {

// Bytes of a chunk's KV stored at dtype t (f32, f16 or bf16).
double kv_bytes_at(const ChunkKV& kv, DType t) {
  double floats = 0;
  for (const auto& b : kv.blocks) floats += double(b.rows()) * b.cols();
  return floats * (t == DType::F32 ? 4 : 2);
}

}  // namespace

ArmBuild patched_build(const PreparedItem& it, const std::vector<Patch>& patches) {
  ArmBuild b;
  double full_bytes = 0;
  for (size_t i = 0; i < patches.size(); ++i) {
    const Patch& p = patches[i];
    full_bytes += kv_bytes_at(it.reused[i].canon->kv, p.options.dtype);
    b.cost.kv_bytes += double(p.bytes());
    for (const PatchFactor& f : p.factors) b.cost.flops += 2.0 * f.rows * f.rank * f.cols;
    ChunkKV served = it.reused[i].canon->kv;
    apply_patch(p, served);
    b.served.push_back(std::move(served));
  }
  b.cost.bytes_fraction = full_bytes > 0 ? b.cost.kv_bytes / full_bytes : 0;
  return b;
}

Result<ArmBuild> PatchArm::build(const PreparedItem& it, SeqId seq) {
  KAMERA_TRY(place_reused(it, seq, &patches_));
  return patched_build(it, patches_);
}

Result<ArmBuild> OracleMaskArm::build(const PreparedItem& it, SeqId seq) {
  ChunkCache& cc = it.ctx->cache();
  for (const ReusedChunk& r : it.reused) {
    AttentionMask mask;  // the chunk's queries may not see the exact chunks' tokens
    mask.blocks.push_back({0, r.content->n(), it.anchor_tokens, it.prefix_tokens});
    KAMERA_TRY(cc.forward_chunk(seq, *r.content, r.position, LogitsMode::None, &mask));
  }
  return ArmBuild{};
}

}  // namespace kamera
