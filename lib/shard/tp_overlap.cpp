// --tp-comm-overlap: Transformer Engine's userbuffers overlap of the sequence-parallel
// collectives of the transformer layers with their GEMMs, with TE's default methods
// (initialize_ub in transformer_engine/pytorch/module/base.py):
// - ring exchange for an all-gather feeding a GEMM (QKV and fc1 forward, proj and fc2
//   dgrad): the GEMM runs in tp chunks, chunk 0 on the rank's own piece, chunk k on the piece
//   the k-th send_recv step of a ring brings; the steps run back to back on the TP stream;
// - pipeline for a GEMM whose partial sums are reduce-scattered (proj and fc2 forward): the
//   GEMM runs in 4 chunks, each chunk's reduce-scatter launched as soon as it is done;
// - bulk for the QKV and fc1 backward (the input all-gather beside the dgrad GEMM, the dgrad
//   reduce-scatter beside the wgrad GEMM): the streams already overlap these, nothing to split.
#include <algorithm>
#include <map>

#include "common/error.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

// TE's default num_splits of a "pipeline" overlap.
constexpr int64_t kPipelineSplits = 4;

bool tp_microbatch_collective(const ShardOp& op, Collective collective) {
  return op.kind == OpKind::collective && op.collective == collective && op.group == CommGroup::tp && op.scope == OpScope::microbatch;
}

// A GEMM of a transformer layer (TE's linears; the output layer is Megatron's own
// ColumnParallelLinear, without userbuffers).
bool layer_gemm(const ShardOp& op) { return op.kind == OpKind::gemm && op.scope == OpScope::microbatch && op.layer.has_value(); }

// A forward GEMM, recomputed or not (TE's fprop overlaps).
bool fprop(const ShardOp& op) { return op.pass == OpPass::forward || op.recompute; }

// What to split: each split op's chunk count, and each split buffer's pieces: chunk i of a
// split GEMM uses piece i, every other op all of them.
struct OverlapPlan {
  std::map<int64_t, int64_t> chunks_of_op;
  std::map<int64_t, std::vector<int64_t>> pieces_of_buffer;
};

class Planner {
 public:
  Planner(const std::vector<ShardOp>& ops, int64_t tp, OpEmitter& emitter) : ops_(ops), tp_(tp), emitter_(emitter) {}

  OverlapPlan run() {
    std::map<int64_t, int64_t> last_writer;
    for (const ShardOp& op : ops_) {
      if (tp_microbatch_collective(op, Collective::all_gather) && op.reads.size() == 1 && op.writes.size() == 1)
        plan_ring_exchange(op);
      if (tp_microbatch_collective(op, Collective::reduce_scatter) && op.reads.size() == 1 && last_writer.count(op.reads[0]))
        plan_pipeline(ops_[last_writer[op.reads[0]]], op);
      for (int64_t b : op.writes) last_writer[b] = op.id;
    }
    return plan_;
  }

 private:
  // The all-gather and the first GEMM reading what it gathers, unless that is a weight-gradient
  // GEMM (TE's bulk overlap). Pieces of the gathered buffer: the rank's own (the all-gather's
  // input), then one per ring step.
  void plan_ring_exchange(const ShardOp& gather) {
    int64_t gathered = gather.writes[0];
    auto reader = std::find_if(ops_.begin() + gather.id + 1, ops_.end(), [&](const ShardOp& op) {
      return std::count(op.reads.begin(), op.reads.end(), gathered) > 0 && op.kind == OpKind::gemm;
    });
    if (reader == ops_.end() || !layer_gemm(*reader) || reader->pass == OpPass::weight || plan_.chunks_of_op.count(reader->id))
      return;
    plan_.chunks_of_op[gather.id] = tp_ - 1;
    plan_.chunks_of_op[reader->id] = tp_;
    std::vector<int64_t>& pieces = plan_.pieces_of_buffer[gathered];
    pieces.push_back(gather.reads[0]);
    add_pieces(gathered, tp_ - 1, tp_, pieces);
  }

  // A forward GEMM and the reduce-scatter of its partial sums, in TE's pipeline chunks.
  void plan_pipeline(const ShardOp& gemm, const ShardOp& scatter) {
    if (!layer_gemm(gemm) || !fprop(gemm) || plan_.chunks_of_op.count(gemm.id)) return;
    plan_.chunks_of_op[gemm.id] = kPipelineSplits;
    plan_.chunks_of_op[scatter.id] = kPipelineSplits;
    add_pieces(scatter.reads[0], kPipelineSplits, kPipelineSplits, plan_.pieces_of_buffer[scatter.reads[0]]);
  }

  // Appends `count` new buffers, each 1/`parts` of `buffer`.
  void add_pieces(int64_t buffer, int64_t count, int64_t parts, std::vector<int64_t>& pieces) {
    const ShardBuffer& whole = emitter_.shard().buffers[buffer];
    double bytes = whole.bytes / static_cast<double>(parts);
    const TensorRole role = whole.role;
    for (int64_t i = 0; i < count; ++i) pieces.push_back(emitter_.add_buffer(bytes, role));
  }

  const std::vector<ShardOp>& ops_;
  int64_t tp_;
  OpEmitter& emitter_;
  OverlapPlan plan_;
};

std::vector<int64_t> with_all_pieces(const IdList& buffers, const OverlapPlan& plan) {
  std::vector<int64_t> out;
  for (int64_t b : buffers) {
    auto split = plan.pieces_of_buffer.find(b);
    if (split == plan.pieces_of_buffer.end())
      out.push_back(b);
    else
      out.insert(out.end(), split->second.begin(), split->second.end());
  }
  return out;
}

// Chunk `index` of a split GEMM or reduce-scatter: its share of the work, on piece `index` of
// each split buffer.
ShardOp chunk_of(const ShardOp& op, int64_t index, int64_t chunks, const OverlapPlan& plan) {
  ShardOp chunk = op;
  double share = 1.0 / static_cast<double>(chunks);
  split_tokens(chunk, share);
  chunk.message_bytes *= share;
  for (auto* buffers : {&chunk.reads, &chunk.writes})
    for (int64_t& b : *buffers) {
      auto split = plan.pieces_of_buffer.find(b);
      if (split != plan.pieces_of_buffer.end()) b = split->second[index];
    }
  return chunk;
}

// Step `step` (1 .. tp-1) of the ring exchange replacing an all-gather: it passes on the piece
// the step before brought (the rank's own at step 1) and receives the next one.
ShardOp ring_step(const ShardOp& gather, int64_t step, int64_t tp, const OverlapPlan& plan) {
  const std::vector<int64_t>& pieces = plan.pieces_of_buffer.at(gather.writes[0]);
  ShardOp send_recv = gather;
  send_recv.name = "collective::send_recv";
  send_recv.collective = Collective::send_recv;
  send_recv.message_bytes = gather.message_bytes / static_cast<double>(tp);
  send_recv.bytes = send_recv.message_bytes;
  send_recv.reads = {pieces[step - 1]};
  send_recv.writes = {pieces[step]};
  return send_recv;
}

}  // namespace

void apply_tp_comm_overlap(const ShardContext& context, ShardSection& shard) {
  if (!context.options.training.tp_comm_overlap) return;
  if (!context.sequence_parallel())
    throw UsageError("tp_comm_overlap needs --sp with tp > 1 (Megatron-LM overlaps TP communication only under "
                     "sequence parallelism)");
  OpRewriter rewriter(shard);
  OverlapPlan plan = Planner(rewriter.old_ops(), context.tp(), rewriter.emitter()).run();
  for (const ShardOp& op : rewriter.old_ops()) {
    auto split = plan.chunks_of_op.find(op.id);
    if (split == plan.chunks_of_op.end()) {
      ShardOp kept = op;
      kept.reads = with_all_pieces(op.reads, plan);
      kept.writes = with_all_pieces(op.writes, plan);
      rewriter.keep(op.id, kept);
    } else if (op.collective == Collective::all_gather) {
      for (int64_t step = 1; step < context.tp(); ++step) rewriter.keep(op.id, ring_step(op, step, context.tp(), plan));
    } else {
      for (int64_t i = 0; i < split->second; ++i) rewriter.keep(op.id, chunk_of(op, i, split->second, plan));
    }
  }
}

}  // namespace syssim
