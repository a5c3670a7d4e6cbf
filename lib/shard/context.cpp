// Context parallelism: every rank holds s/cp tokens of each sequence (two of its 2*cp
// chunks, Megatron-LM's load-balanced causal split), so every op already works on s/cp
// tokens; only attention needs the keys and values of the other ranks. This pass replaces
// each flash-attention op by Transformer Engine's exchange of K/V blocks between the CP ranks:
// the ring of AttnFuncWithCPAndKVP2P (cp_comm_type p2p) or the all-gather of
// AttnFuncWithCPAndKVAllGather (cp_comm_type all_gather).
//
// FLOPs: the traced op evaluated at s/cp is the causal attention of one rank's s/cp queries
// over its own s/cp keys, 2*(s/cp)^2*b*a*d forward. With the load-balanced split every ring
// step, the diagonal one and the others, does exactly that much work (step i > 0 attends all
// local queries to half of a block or half of the queries to a whole block: s/cp * s/(2cp)
// pairs, none masked), so cp steps make 2*s^2*b*a*d/cp: the full causal attention over cp.
#include "common/error.hpp"
#include "shard/passes.hpp"

namespace syssim {
namespace {

// Operand positions of the traced flash-attention ops (lib/trace/ops.cpp).
enum ForwardOperand { kQuery = 0, kKey = 1, kValue = 2 };
enum BackwardOperand { kOutputGrad = 0, kBackwardQuery = 1, kBackwardKey = 2, kBackwardValue = 3, kOutput = 4 };
enum BackwardResult { kQueryGrad = 0, kKeyGrad = 1, kValueGrad = 2 };

class ContextParallelRewriter {
 public:
  ContextParallelRewriter(const ShardContext& context, ShardSection& shard)
      : context_(context), cp_(context.options.parallelism.cp), rewriter_(shard) {}

  void run() {
    for (const ShardOp& op : rewriter_.old_ops()) {
      if (op.name.named_op() == NamedOp::flash_attn)
        all_gather() ? gather_forward(op) : ring_forward(op);
      else if (op.name.named_op() == NamedOp::flash_attn_backward)
        all_gather() ? gather_backward(op) : ring_backward(op);
      else
        rewriter_.keep(op.id);
    }
  }

 private:
  bool all_gather() const { return context_.options.cp_comm_type == "all_gather"; }

  // The rank's K and V blocks (s/cp tokens), from the traced operands.
  struct Block {
    double elements = 0;
    double bytes = 0;
  };
  Block key_value_block(const ShardOp& op, int key, int value) const {
    const TraceOp& traced = context_.trace.ops.at(*op.trace_op);
    const std::string where = "/trace/ops/" + std::to_string(traced.id) + "/inputs/";
    Block block;
    for (int operand : {key, value}) {
      const TensorRef& ref = traced.inputs.at(operand);
      double elements = numel_at(ref.dims, context_.full_axes, where + std::to_string(operand));
      block.elements += elements;
      block.bytes += elements * dtype_size(ref.dtype);
    }
    return block;
  }


  ShardOp exchange(const ShardOp& attention, Collective collective, double message_bytes) const {
    ShardOp c = make_collective(context_, collective, CommGroup::cp, message_bytes, attention.phase, attention.scope);
    place_with(attention, c);
    return c;
  }

  int64_t add_buffer(double bytes, TensorRole role) { return rewriter_.emitter().add_buffer(bytes, role); }

  static void check_operands(const ShardOp& op, size_t reads, size_t writes) {
    if (op.reads.size() != reads || op.writes.size() != writes || !op.trace_op)
      throw DataError("/shard/ops/" + std::to_string(op.id) + ": " + op.name + " has " +
                      std::to_string(op.reads.size()) + " inputs and " + std::to_string(op.writes.size()) +
                      " outputs, expected " + std::to_string(reads) + " and " + std::to_string(writes));
  }

  // Forward ring: step i attends the local queries to the K/V block received at step i - 1
  // while the next block travels on the CP stream (cp - 1 exchanges; the last block is not
  // passed on). Each step adds its partial result to the output.
  void ring_forward(const ShardOp& attention) {
    check_operands(attention, 3, 1);
    double block_bytes = key_value_block(attention, kKey, kValue).bytes;
    const int64_t query = attention.reads[kQuery], output = attention.writes[0];
    std::vector<int64_t> block = {attention.reads[kKey], attention.reads[kValue]};
    std::vector<int64_t> launch_after = rewriter_.emitter().writers_of(attention.reads);
    for (int64_t step = 0; step < cp_; ++step) {
      std::vector<int64_t> next_block;
      if (step + 1 < cp_) {
        ShardOp send_recv = exchange(attention, Collective::send_recv, block_bytes);
        next_block = {add_buffer(block_bytes, TensorRole::comm)};
        send_recv.reads = block;
        send_recv.writes = next_block;
        rewriter_.add(send_recv, step == 0 ? launch_after : std::vector<int64_t>{});
      }
      ShardOp compute = attention;
      compute.reads = {query};
      compute.reads.insert(compute.reads.end(), block.begin(), block.end());
      if (step > 0) compute.reads.push_back(output);
      if (step + 1 < cp_)
        rewriter_.add(compute);
      else
        rewriter_.keep(attention.id, compute);
      block = next_block;
    }
  }

  // Backward ring (reverse direction): step i sends on the K/V block it holds and the dK/dV
  // accumulated at step i - 1 while it computes its gradients for the block; then it adds its
  // dK/dV to the partial sums received for that block. The first exchange carries K/V only,
  // the last dK/dV only: cp exchanges moving 2 * (cp - 1) blocks.
  void ring_backward(const ShardOp& attention) {
    check_operands(attention, 5, 3);
    const Block kv = key_value_block(attention, kBackwardKey, kBackwardValue);
    const double block_bytes = kv.bytes;
    const auto& r = attention.reads;
    const int64_t query_grad = attention.writes[kQueryGrad];
    std::vector<int64_t> block = {r[kBackwardKey], r[kBackwardValue]};
    std::vector<int64_t> launch_after = rewriter_.emitter().writers_of(attention.reads);
    std::optional<int64_t> accumulated;  // dK/dV summed over the ranks that held the block so far
    for (int64_t step = 0; step < cp_; ++step) {
      const bool last = step + 1 == cp_;
      ShardOp send_recv = exchange(attention, Collective::send_recv, 0);
      std::optional<int64_t> next_block, received_grads;
      if (!last) {
        send_recv.reads = block;
        next_block = add_buffer(block_bytes, TensorRole::comm);
        send_recv.writes.push_back(*next_block);
        send_recv.message_bytes += block_bytes;
      }
      if (accumulated) {
        send_recv.reads.push_back(*accumulated);
        received_grads = add_buffer(block_bytes, TensorRole::comm);
        send_recv.writes.push_back(*received_grads);
        send_recv.message_bytes += block_bytes;
      }
      send_recv.bytes = send_recv.message_bytes;
      rewriter_.add(send_recv, step == 0 ? launch_after : std::vector<int64_t>{});

      ShardOp compute = attention;
      compute.reads = {r[kOutputGrad], r[kBackwardQuery], r[kOutput]};
      compute.reads.insert(compute.reads.end(), block.begin(), block.end());
      if (step > 0) compute.reads.push_back(query_grad);
      const int64_t step_grads = add_buffer(block_bytes, TensorRole::activation);
      compute.writes = {query_grad, step_grads};
      if (last)
        rewriter_.keep(attention.id, compute);
      else
        rewriter_.add(compute);

      if (received_grads) {
        ShardOp add = accumulate(attention, kv);
        add.reads = {step_grads, *received_grads};
        add.writes = last ? std::vector<int64_t>{attention.writes[kKeyGrad], attention.writes[kValueGrad]}
                          : std::vector<int64_t>{*received_grads};
        rewriter_.add(add);
        accumulated = received_grads;
      } else {
        accumulated = step_grads;
      }
      if (next_block) block = {*next_block};
    }
  }

  // dK += dK_step, dV += dV_step (Transformer Engine's dk.add_, dv.add_): one addition per
  // element, two blocks read and one written.
  static ShardOp accumulate(const ShardOp& attention, const Block& grads) {
    ShardOp add = compute_op_for(attention, "context_parallel::dkv_add", OpKind::math, attention.dtype);
    add.flops = grads.elements;
    add.bytes = 3 * grads.bytes;
    return add;
  }

  // All-gather: the full-sequence K and V are gathered before the attention (exposed), and
  // the local queries attend them in one op doing the cp steps' work.
  void gather_forward(const ShardOp& attention) {
    check_operands(attention, 3, 1);
    double block_bytes = key_value_block(attention, kKey, kValue).bytes;
    int64_t gathered = add_buffer(block_bytes * cp_, TensorRole::comm);
    ShardOp gather = exchange(attention, Collective::all_gather, block_bytes * cp_);
    gather.reads = {attention.reads[kKey], attention.reads[kValue]};
    gather.writes = {gathered};
    rewriter_.add(gather, rewriter_.emitter().writers_of(attention.reads));
    ShardOp compute = attention;
    compute.reads = {attention.reads[kQuery], gathered};
    compute.flops = attention.flops * cp_;
    compute.bytes = attention.bytes + block_bytes * (cp_ - 1);  // reads every K/V block
    rewriter_.keep(attention.id, compute);
  }

  // Backward of the all-gather variant: K and V are gathered again (only the local blocks are
  // kept from the forward), the gradients of all of them computed, and dK/dV reduce-scattered.
  void gather_backward(const ShardOp& attention) {
    check_operands(attention, 5, 3);
    double block_bytes = key_value_block(attention, kBackwardKey, kBackwardValue).bytes;
    const auto& r = attention.reads;
    int64_t gathered = add_buffer(block_bytes * cp_, TensorRole::comm);
    ShardOp gather = exchange(attention, Collective::all_gather, block_bytes * cp_);
    gather.reads = {r[kBackwardKey], r[kBackwardValue]};
    gather.writes = {gathered};
    rewriter_.add(gather, rewriter_.emitter().writers_of(attention.reads));

    int64_t full_grads = add_buffer(block_bytes * cp_, TensorRole::activation);
    ShardOp compute = attention;
    compute.reads = {r[kOutputGrad], r[kBackwardQuery], r[kOutput], gathered};
    compute.writes = {attention.writes[kQueryGrad], full_grads};
    compute.flops = attention.flops * cp_;
    compute.bytes = attention.bytes + 2 * block_bytes * (cp_ - 1);  // every K/V block and its gradient
    rewriter_.keep(attention.id, compute);

    ShardOp scatter = exchange(attention, Collective::reduce_scatter, block_bytes * cp_);
    scatter.reads = {full_grads};
    scatter.writes = {attention.writes[kKeyGrad], attention.writes[kValueGrad]};
    rewriter_.add(scatter);
  }

  const ShardContext& context_;
  const int64_t cp_;
  OpRewriter rewriter_;
};

}  // namespace

void apply_context_parallel(const ShardContext& context, ShardSection& shard) {
  const int64_t cp = context.options.parallelism.cp;
  const std::string& comm_type = context.options.cp_comm_type;
  if (comm_type == "a2a" || comm_type == "a2a+p2p")
    throw UsageError("cp_comm_type=" + comm_type + " (Megatron-LM's all-to-all exchange) is not simulated yet: give p2p or all_gather");
  if (comm_type != "p2p" && comm_type != "all_gather")
    throw UsageError("cp_comm_type=" + comm_type + ": expected p2p or all_gather");
  if (cp == 1) return;
  if (context.model.attention_backend != "flash")
    throw UsageError("cp=" + std::to_string(cp) + " needs attention_backend=flash: Megatron-LM runs context "
                     "parallelism only in Transformer Engine's fused attention, not in " +
                     context.model.attention_backend + " attention");
  ContextParallelRewriter(context, shard).run();
}

}  // namespace syssim
