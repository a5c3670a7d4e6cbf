#include "trace/recorder.hpp"

#include <algorithm>
#include <unordered_map>

#include "common/error.hpp"
#include "trace/op_rules.hpp"

namespace syssim::trace_detail {
namespace {

struct Scope {
  std::string module;
  TpRole tp_role;
};
thread_local std::vector<Scope> scope_stack;

// The autograd engine wraps each node it runs, and the gradient accumulation and broadcast
// reductions that follow it, in a record with this prefix.
const std::string kEngineStepPrefix = "autograd::engine::evaluate_function: ";

// One active RecordFunction.
struct Frame {
  enum Kind { kOp, kNode, kEngineStep } kind = kOp;
  int64_t seq = -1;           // autograd sequence number; of an engine step: of the node it ran
  std::optional<int64_t> op;  // the op recorded for it
  bool inside_kept = false;   // it or an enclosing record is a recorded op
};

const char* dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    case at::kFloat: return "fp32";
    case at::kLong: return "i64";
    case at::kBool: return "bool";
    default: return nullptr;
  }
}

std::optional<int64_t> layer_of(const std::string& module) {
  const std::string prefix = "decoder.layers.";
  if (module.rfind(prefix, 0) != 0) return std::nullopt;
  return std::stoll(module.substr(prefix.size()));
}

template <typename F>
void for_each_tensor(const c10::IValue& value, const F& f) {
  if (value.isTensor()) {
    if (value.toTensor().defined()) f(value.toTensor());
  } else if (value.isList()) {
    for (const c10::IValue& item : value.toListRef()) for_each_tensor(item, f);
  }
}

}  // namespace

struct Recorder::State {
  ConcreteTrace trace;
  std::unordered_map<const c10::StorageImpl*, int64_t> buffer_ids;
  std::vector<c10::Storage> storages;          // keeps buffers alive: addresses are reused otherwise
  std::vector<std::optional<int64_t>> writer;  // per buffer: the last recorded op that wrote it
  std::unordered_map<int64_t, int64_t> forward_op_by_seq;
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  std::vector<Frame> stack;
  bool backward = false;
  std::string error;  // the first failure: callbacks must not throw

  void fail(const std::string& message) {
    if (error.empty()) error = message;
  }

  std::string dtype_of(const at::Tensor& t) {
    if (const char* name = dtype_name(t.scalar_type())) return name;
    fail(std::string("unsupported dtype ") + c10::toString(t.scalar_type()));
    return "";
  }

  // Views of one storage are one buffer.
  int64_t buffer_of(const at::Tensor& t) {
    const c10::Storage& storage = t.storage();
    auto [it, inserted] = buffer_ids.emplace(storage.unsafeGetStorageImpl(), trace.tensors.size());
    if (inserted) {
      storages.push_back(storage);
      writer.emplace_back();
      trace.tensors.push_back(ConcreteTensor{it->second, t.sizes().vec(), dtype_of(t), TensorRole::activation, ""});
    }
    return it->second;
  }

  ConcreteOperand operand(const at::Tensor& t) { return {buffer_of(t), t.sizes().vec(), dtype_of(t)}; }

  const Frame* innermost(Frame::Kind kind) const {
    for (auto frame = stack.rbegin(); frame != stack.rend(); ++frame)
      if (frame->kind == kind) return &*frame;
    return nullptr;
  }

  std::optional<int64_t> forward_op_of(const Frame* frame) const {
    if (!frame) return std::nullopt;
    auto it = forward_op_by_seq.find(frame->seq);
    return it == forward_op_by_seq.end() ? std::nullopt : std::optional<int64_t>(it->second);
  }

  ConcreteOp make_op(const at::RecordFunction& fn, const std::string& name) {
    ConcreteOp op;
    op.name = name;
    op.phase = backward ? OpPhase::bwd : OpPhase::fwd;
    for (const c10::IValue& value : fn.inputs())
      for_each_tensor(value, [&](const at::Tensor& t) { op.inputs.push_back(operand(t)); });
    for (const ConcreteOperand& input : op.inputs)
      if (writer[input.tensor]) op.deps.push_back(*writer[input.tensor]);
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());

    // A backward op belongs where its forward op does. Ops the engine runs after a node
    // (gradient accumulation, broadcast reductions) belong with that node; others (gradients
    // of views) with their newest input.
    std::optional<int64_t> owner;
    if (backward) {
      op.fwd_op = forward_op_of(innermost(Frame::kNode));
      owner = op.fwd_op ? op.fwd_op : forward_op_of(innermost(Frame::kEngineStep));
      if (!owner && !op.deps.empty()) owner = op.deps.back();
    }
    if (owner) {
      const ConcreteOp& from = trace.ops[*owner];
      op.module = from.module;
      op.tp_role = from.tp_role;
      op.layer = from.layer;
    } else {
      Scope scope = scope_stack.empty() ? Scope{"", TpRole::none} : scope_stack.back();
      op.module = scope.module;
      op.tp_role = scope.tp_role;
      op.layer = layer_of(scope.module);
    }
    return op;
  }

  void start(const at::RecordFunction& fn, Frame::Kind kind) {
    Frame frame{kind, fn.seqNr(), std::nullopt, !stack.empty() && stack.back().inside_kept};
    std::string name = fn.name();
    if (kind == Frame::kOp && name.rfind(kEngineStepPrefix, 0) == 0) frame.kind = Frame::kEngineStep;
    if (frame.kind == Frame::kOp && !frame.inside_kept) {
      const OpRule* rule = find_op_rule(name);
      if (rule) {
        ConcreteOp op = make_op(fn, name);
        op.kind = rule->kind;
        frame.op = static_cast<int64_t>(trace.ops.size());
        frame.inside_kept = true;
        trace.ops.push_back(std::move(op));
      } else if (!is_transparent_op(name)) {
        fail("no cost rule for aten op '" + name + "' in module '" + make_op(fn, name).module + "'");
      }
      // The forward op that creates autograd node N is the last one dispatched with number N.
      if (!backward && frame.seq >= 0) {
        if (frame.op)
          forward_op_by_seq[frame.seq] = *frame.op;
        else
          forward_op_by_seq.erase(frame.seq);
      }
    }
    stack.push_back(frame);
  }

  void end(const at::RecordFunction& fn) {
    Frame frame = stack.back();
    stack.pop_back();
    if (frame.kind == Frame::kNode && !stack.empty() && stack.back().kind == Frame::kEngineStep)
      stack.back().seq = frame.seq;
    if (!frame.op) return;
    ConcreteOp& op = trace.ops[*frame.op];
    for (const c10::IValue& value : fn.outputs())
      for_each_tensor(value, [&](const at::Tensor& t) { op.outputs.push_back(operand(t)); });
    for (const ConcreteOperand& output : op.outputs) writer[output.tensor] = *frame.op;
  }
};

namespace {

thread_local Recorder::State* active = nullptr;

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  if (active) active->start(fn, Frame::kOp);
  return nullptr;
}

std::unique_ptr<at::ObserverContext> on_node_start(const at::RecordFunction& fn) {
  if (active) active->start(fn, Frame::kNode);
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (active) active->end(fn);
}

}  // namespace

ModuleScope::ModuleScope(const std::string& path, TpRole tp_role) {
  scope_stack.push_back(Scope{path, tp_role});
}

ModuleScope::~ModuleScope() { scope_stack.pop_back(); }

Recorder::Recorder() : state_(std::make_unique<State>()) {
  if (active) throw DataError("a trace is already being recorded on this thread");
  active = state_.get();
  op_callback_ = at::addThreadLocalCallback(at::RecordFunctionCallback(on_op_start, on_end)
                                                .needsInputs(true)
                                                .needsOutputs(true)
                                                .scopes({at::RecordScope::FUNCTION}));
  // Autograd nodes only tie backward ops to forward ops. Their inputs are not requested: holding
  // them would stop autograd from stealing a gradient and make it copy it instead.
  node_callback_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_node_start, on_end).scopes({at::RecordScope::BACKWARD_FUNCTION}));
}

Recorder::~Recorder() {
  at::removeCallback(op_callback_);
  at::removeCallback(node_callback_);
  active = nullptr;
}

at::Tensor Recorder::parameter(const std::string& name, const at::Tensor& tensor) {
  ConcreteTensor& buffer = state_->trace.tensors[state_->buffer_of(tensor)];
  buffer.role = TensorRole::param;
  buffer.param = name;
  state_->parameters.emplace_back(name, tensor);
  return tensor;
}

at::Tensor Recorder::input(const at::Tensor& tensor) {
  state_->trace.tensors[state_->buffer_of(tensor)].role = TensorRole::input;
  return tensor;
}

void Recorder::backward(const at::Tensor& loss) {
  state_->backward = true;
  loss.backward();
  state_->backward = false;
}

ConcreteTrace Recorder::finish() {
  State& state = *state_;
  for (const auto& [name, parameter] : state.parameters) {
    if (!parameter.grad().defined()) continue;
    ConcreteTensor& buffer = state.trace.tensors[state.buffer_of(parameter.grad())];
    buffer.role = TensorRole::grad;
    buffer.param = name;
  }
  if (!state.error.empty()) throw DataError(state.error);
  return std::move(state.trace);
}

}  // namespace syssim::trace_detail
