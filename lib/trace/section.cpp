#include "trace/section.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <unordered_map>

#include "common/dtype.hpp"
#include "common/json_util.hpp"

namespace syssim {
namespace {

json ref_to_json(const TensorRef& r) {
  return {{"tensor", r.tensor}, {"dims", dims_to_strings(r.dims)}, {"dtype", r.dtype}};
}

// Reads axis expressions, parsing each text once: the texts of one layer repeat in every
// other layer, and parsing them took a third of reading a trace.
// Where an expression sits is only spelled out for one that does not parse.
class PolyReader {
 public:
  template <typename Where>
  const Poly& read(const std::string& text, const Where& where) {
    auto it = parsed_.find(text);
    if (it == parsed_.end()) it = parsed_.emplace(text, Poly::parse(text, where())).first;
    return it->second;
  }

  Dims dims(const json& j, const std::string& path) {
    Dims dims;
    for (const std::string& text : require_as<std::vector<std::string>>(j, "dims", path))
      dims.push_back(read(text, [&] { return dim_path(path, dims.size()); }));
    return dims;
  }

  static std::string dim_path(const std::string& path, size_t i) { return path + "/dims[" + std::to_string(i) + "]"; }

 private:
  std::unordered_map<std::string, Poly> parsed_;
};

// A tensor's or an operand's dtype: one whose elements the stages can size.
std::string require_dtype(const json& j, const std::string& path) {
  std::string dtype = require_as<std::string>(j, "dtype", path);
  if (!element_bytes(dtype))
    throw DataError("graph: " + path + "/dtype: expected bf16, fp16, fp32, i64, bool, fp8 or fp4, got '" + dtype + "'");
  return dtype;
}

std::vector<TensorRef> refs_from_json(const json& j, const std::string& key, const std::string& path, PolyReader& polys) {
  std::vector<TensorRef> refs;
  const json& list = require(j, key, path);
  refs.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = path + "/" + key + "/" + std::to_string(i);
    refs.push_back(TensorRef{require_as<int64_t>(list[i], "tensor", p), polys.dims(list[i], p), require_dtype(list[i], p)});
  }
  return refs;
}

// "SYSSIM-TRACE", then the binary form's version.
constexpr char kBinaryMagic[] = "SYSSIM-TRACE";
constexpr uint32_t kBinaryVersion = 3;  // 3: the op kind and phase as numbers

// Writes numbers in host byte order and each distinct string once, in a table before the
// rest, so that a trace's repeated names, dtypes and axis expressions cost an index each.
class BinaryWriter {
 public:
  template <typename T>
  void number(T value) {
    static_assert(std::is_arithmetic_v<T>);
    body_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void text(const std::string& value) {
    auto [it, added] = index_.emplace(value, static_cast<uint32_t>(strings_.size()));
    if (added) strings_.push_back(&it->first);
    number(it->second);
  }
  void optional(const std::optional<int64_t>& value) {
    number<uint8_t>(value.has_value());
    number<int64_t>(value.value_or(0));
  }
  void poly(const Poly& value) { text(value.to_string()); }
  void dims(const Dims& value) {
    number(static_cast<uint32_t>(value.size()));
    for (const Poly& d : value) poly(d);
  }
  std::string finish() const {
    std::string out(kBinaryMagic, sizeof kBinaryMagic);
    BinaryWriter head;
    head.number(kBinaryVersion);
    head.number(static_cast<uint32_t>(strings_.size()));
    for (const std::string* value : strings_) {
      head.number(static_cast<uint32_t>(value->size()));
      head.body_ += *value;
    }
    return out + head.body_ + body_;
  }

 private:
  std::string body_;
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<const std::string*> strings_;  // by index
};

// Reads what BinaryWriter wrote; any read past the end or a bad index throws DataError.
class BinaryReader {
 public:
  BinaryReader(const std::string& bytes, std::string source) : bytes_(bytes), source_(std::move(source)) {
    if (bytes_.compare(0, sizeof kBinaryMagic, std::string(kBinaryMagic, sizeof kBinaryMagic)) != 0)
      fail("not a binary trace");
    at_ = sizeof kBinaryMagic;
    if (auto version = number<uint32_t>(); version != kBinaryVersion)
      fail("binary trace version " + std::to_string(version) + ", this syssim reads " + std::to_string(kBinaryVersion));
    strings_.resize(count(sizeof(uint32_t)));
    for (std::string& value : strings_) {
      auto size = number<uint32_t>();
      need(size);
      value.assign(bytes_, at_, size);
      at_ += size;
    }
    symbols_.resize(strings_.size());
    polys_.resize(strings_.size());
  }
  template <typename T>
  T number() {
    T value;
    need(sizeof value);
    std::memcpy(&value, bytes_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  // A count of items that take at least `item_bytes` each: never more than the bytes left.
  size_t count(size_t item_bytes) {
    auto n = number<uint32_t>();
    need(static_cast<size_t>(n) * item_bytes);
    return n;
  }
  const std::string& text() { return strings_[index()]; }
  // The text as a Symbol, interned once per entry of the table: a trace names the same few
  // hundred texts in every layer, and interning each again took a quarter of a read.
  Symbol symbol() {
    const uint32_t i = index();
    if (!symbols_[i]) symbols_[i] = Symbol(strings_[i]);
    return *symbols_[i];
  }
  std::optional<int64_t> optional() {
    bool present = number<uint8_t>() != 0;
    auto value = number<int64_t>();
    return present ? std::optional<int64_t>(value) : std::nullopt;
  }
  // The expression, parsed once per entry of the table.
  template <typename Where>
  const Poly& poly(const Where& where) {
    const uint32_t i = index();
    if (!polys_[i]) polys_[i] = Poly::parse(strings_[i], where());
    return *polys_[i];
  }
  // `where` makes the path that a message names, only for one.
  template <typename Where>
  Dims dims(const Where& where) {
    Dims dims(count(sizeof(uint32_t)));
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = poly([&] { return PolyReader::dim_path(where(), i); });
    return dims;
  }
  bool done() const { return at_ == bytes_.size(); }
  // A value of Enum written as its name, no later than `last`.
  template <typename Enum, typename Where>
  Enum text_enum(Enum last, const Where& where) {
    const std::string& name = text();
    const std::optional<Enum> value = parse_enum<Enum>(name);
    if (!value || *value > last) fail(where() + ": " + name + " is not a value it can take");
    return *value;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw DataError(source_ + ": " + why + " (byte " + std::to_string(at_) + ")");
  }

 private:
  // An index into the table of strings.
  uint32_t index() {
    auto i = number<uint32_t>();
    if (i >= strings_.size()) fail("string " + std::to_string(i) + " is not in the table");
    return i;
  }
  void need(size_t size) const {
    if (size > bytes_.size() - at_) fail("ends early");
  }
  const std::string& bytes_;
  const std::string source_;
  size_t at_ = 0;
  std::vector<std::string> strings_;
  // By index into strings_: the text interned, and parsed as an expression, once asked for.
  std::vector<std::optional<Symbol>> symbols_;
  std::vector<std::optional<Poly>> polys_;
};

void refs_to_binary(const std::vector<TensorRef>& refs, BinaryWriter& out) {
  out.number(static_cast<uint32_t>(refs.size()));
  for (const TensorRef& r : refs) {
    out.number(r.tensor);
    out.dims(r.dims);
    out.text(r.dtype);
  }
}

template <typename Where>
std::vector<TensorRef> refs_from_binary(BinaryReader& in, const TraceSection& t, const Where& where) {
  std::vector<TensorRef> refs(in.count(sizeof(int64_t)));
  for (TensorRef& r : refs) {
    r.tensor = in.number<int64_t>();
    if (r.tensor < 0 || r.tensor >= static_cast<int64_t>(t.tensors.size()))
      in.fail(where() + ": tensor " + std::to_string(r.tensor) + " does not exist");
    r.dims = in.dims(where);
    r.dtype = in.symbol();
  }
  return refs;
}

}  // namespace

AxisValues architecture_axes(const ModelConfig& model) {
  auto value = [](int64_t v) { return static_cast<double>(v); };
  AxisValues axes = {{"h", value(model.hidden_size)},
                     {"g", value(model.num_query_groups)},
                     {"r", value(model.num_attention_heads / model.num_query_groups)},
                     {"d", value(model.kv_channels)},
                     {"f", value(model.ffn_hidden_size)},
                     {"v", value(model.vocab_size)},
                     {"p", value(model.max_position_embeddings)}};
  if (model.is_moe()) {
    axes["e"] = value(model.num_moe_experts);
    axes["k"] = value(model.moe_router_topk);
    axes["m"] = value(model.moe_ffn_hidden_size);
    if (model.moe_shared_expert_intermediate_size > 0) axes["u"] = value(model.moe_shared_expert_intermediate_size);
  }
  if (model.multi_latent_attention) {
    if (model.q_lora_rank > 0) axes["q"] = value(model.q_lora_rank);
    axes["c"] = value(model.kv_lora_rank);
    axes["n"] = value(model.qk_head_dim);
    axes["t"] = value(model.qk_pos_emb_head_dim);
    axes["w"] = value(model.v_head_dim);
  }
  if (model.window_size > 0) axes["x"] = value(model.window_size + 1);  // the keys a query sees
  return axes;
}

void check_axes_match_model(const TraceSection& trace, const ModelConfig& model) {
  for (const auto& [axis, value] : architecture_axes(model)) {
    auto traced = trace.axes.find(axis);
    if (traced != trace.axes.end() && traced->second != value)
      throw DataError("graph: /trace/axes/" + axis + ": " + text_of(traced->second) + ", but the model section gives " +
                      text_of(value) + " (docs/graph-format.md, \"Named axes\"); trace the edited model again");
  }
  int64_t layers = 0;
  for (const TraceOp& op : trace.ops)
    if (op.layer) layers = std::max(layers, *op.layer + 1);
  if (layers != model.num_layers)
    throw DataError("graph: /trace/ops: " + std::to_string(layers) + " decoder layers, but the model section gives num_layers=" +
                    std::to_string(model.num_layers) + "; trace the edited model again");
}

double traced_parameters(const TraceSection& trace, const AxisValues& axes) {
  double params = 0;
  for (const TraceTensor& t : trace.tensors)
    if (t.role == TensorRole::param) params += numel_at(t.dims, axes, "/trace/tensors/" + std::to_string(t.id));
  return params;
}

json to_json(const TraceSection& t) {
  json tensors = json::array();
  for (const auto& x : t.tensors)
    tensors.push_back({{"id", x.id}, {"dims", dims_to_strings(x.dims)}, {"dtype", x.dtype}, {"role", to_string(x.role)},
                       {"param", x.param}});
  json ops = json::array();
  for (const auto& op : t.ops) {
    json inputs = json::array(), outputs = json::array();
    for (const auto& r : op.inputs) inputs.push_back(ref_to_json(r));
    for (const auto& r : op.outputs) outputs.push_back(ref_to_json(r));
    ops.push_back({{"id", op.id}, {"name", op.name}, {"kind", to_string(op.kind)}, {"phase", to_string(op.phase)},
                   {"layer", nullable_to_json(op.layer)}, {"module", op.module}, {"tp_role", to_string(op.tp_role)},
                   {"inputs", inputs}, {"outputs", outputs}, {"deps", op.deps}, {"fwd_op", nullable_to_json(op.fwd_op)},
                   {"flops", op.flops.to_string()}, {"bytes", op.bytes.to_string()}});
  }
  return {{"axes", t.axes}, {"tensors", tensors}, {"ops", ops}};
}

TraceSection trace_from_json(const json& j, const std::string& path) {
  TraceSection t;
  PolyReader polys;
  t.axes = require_as<AxisValues>(j, "axes", path);
  for (const auto& [axis, value] : t.axes)  // the model's sizes
    if (!(value >= 1 && value == std::floor(value) && std::isfinite(value)))
      throw DataError("graph: " + path + "/axes/" + axis + ": expected a whole number of 1 or more, got " +
                      json(value).dump());
  const json& tensors = require(j, "tensors", path);
  t.tensors.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string p = path + "/tensors/" + std::to_string(i);
    const json& x = tensors[i];
    t.tensors.push_back(TraceTensor{require_position_id(x, i, p),
                                    polys.dims(x, p),
                                    require_dtype(x, p), require_enum<TensorRole>(x, "role", p, {TensorRole::param, TensorRole::grad, TensorRole::input, TensorRole::activation}),
                                    require_as<std::string>(x, "param", p)});
  }
  const json& ops = require(j, "ops", path);
  if (!ops.is_array() || ops.empty()) throw DataError("graph: " + path + "/ops: expected the traced ops, got " + ops.dump());
  t.ops.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    std::string p = path + "/ops/" + std::to_string(i);
    const json& o = ops[i];
    TraceOp op;
    op.id = require_position_id(o, i, p);
    op.name = require_as<std::string>(o, "name", p);
    op.kind = require_enum<OpKind>(o, "kind", p, {OpKind::gemm, OpKind::attention, OpKind::math, OpKind::memory});
    op.phase = require_enum<OpPhase>(o, "phase", p, {OpPhase::fwd, OpPhase::bwd});
    op.layer = read_nullable<int64_t>(o, "layer", p);
    op.module = require_as<std::string>(o, "module", p);
    op.tp_role = require_enum<TpRole>(o, "tp_role", p);
    op.inputs = refs_from_json(o, "inputs", p, polys);
    op.outputs = refs_from_json(o, "outputs", p, polys);
    op.deps = require_as<std::vector<int64_t>>(o, "deps", p);
    for (int64_t d : op.deps)
      if (d < 0 || d >= op.id) throw DataError("graph: " + p + "/deps: " + std::to_string(d) + " is not an earlier op");
    op.fwd_op = read_nullable<int64_t>(o, "fwd_op", p);
    if (op.fwd_op && (*op.fwd_op < 0 || *op.fwd_op >= op.id))
      throw DataError("graph: " + p + "/fwd_op: " + std::to_string(*op.fwd_op) + " is not an earlier op");
    op.flops = polys.read(require_as<std::string>(o, "flops", p), [&] { return p + "/flops"; });
    op.bytes = polys.read(require_as<std::string>(o, "bytes", p), [&] { return p + "/bytes"; });
    for (const auto* refs : {&op.inputs, &op.outputs})
      for (const auto& r : *refs)
        if (r.tensor < 0 || r.tensor >= static_cast<int64_t>(t.tensors.size()))
          throw DataError("graph: " + p + ": tensor " + std::to_string(r.tensor) + " does not exist");
    t.ops.push_back(std::move(op));
  }
  return t;
}

std::string trace_to_binary(const TraceSection& t) {
  BinaryWriter out;
  out.number(static_cast<uint32_t>(t.axes.size()));
  for (const auto& [axis, value] : t.axes) out.text(axis), out.number(value);
  out.number(static_cast<uint32_t>(t.tensors.size()));
  for (const TraceTensor& x : t.tensors) {
    out.dims(x.dims);
    out.text(x.dtype);
    out.text(to_string(x.role));
    out.text(x.param);
  }
  out.number(static_cast<uint32_t>(t.ops.size()));
  for (const TraceOp& op : t.ops) {
    for (const Symbol* text : {&op.name, &op.module}) out.text(*text);
    out.text(to_string(op.tp_role));
    out.number(static_cast<uint32_t>(op.kind));
    out.number(static_cast<uint32_t>(op.phase));
    out.optional(op.layer);
    refs_to_binary(op.inputs, out);
    refs_to_binary(op.outputs, out);
    out.number(static_cast<uint32_t>(op.deps.size()));
    for (int64_t d : op.deps) out.number(d);
    out.optional(op.fwd_op);
    out.poly(op.flops);
    out.poly(op.bytes);
  }
  return out.finish();
}

TraceSection trace_from_binary(const std::string& bytes, const std::string& source) {
  BinaryReader in(bytes, source);
  TraceSection t;
  for (size_t n = in.count(sizeof(uint32_t) + sizeof(double)); n > 0; --n) {
    const std::string& axis = in.text();
    t.axes[axis] = in.number<double>();
  }
  t.tensors.resize(in.count(4 * sizeof(uint32_t)));
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    TraceTensor& x = t.tensors[i];
    x.id = static_cast<int64_t>(i);
    auto tensor_at = [i] { return "/trace/tensors/" + std::to_string(i); };
    x.dims = in.dims(tensor_at);
    x.dtype = in.symbol();
    x.role = in.text_enum(TensorRole::activation, [&] { return tensor_at() + "/role"; });
    x.param = in.symbol();
  }
  t.ops.resize(in.count(5 * sizeof(uint32_t)));
  for (size_t i = 0; i < t.ops.size(); ++i) {
    auto op_at = [i] { return "/trace/ops/" + std::to_string(i); };
    TraceOp& op = t.ops[i];
    op.id = static_cast<int64_t>(i);
    for (Symbol* text : {&op.name, &op.module}) *text = in.symbol();
    op.tp_role = in.text_enum(TpRole::expert_dispatch, [&] { return op_at() + "/tp_role"; });
    const auto kind = in.number<uint32_t>();
    if (kind > static_cast<uint32_t>(OpKind::memory)) in.fail(op_at() + "/kind: " + std::to_string(kind) + " is not a traced kind");
    op.kind = static_cast<OpKind>(kind);
    const auto phase = in.number<uint32_t>();
    if (phase > static_cast<uint32_t>(OpPhase::bwd)) in.fail(op_at() + "/phase: " + std::to_string(phase) + " is not fwd or bwd");
    op.phase = static_cast<OpPhase>(phase);
    op.layer = in.optional();
    op.inputs = refs_from_binary(in, t, [&] { return op_at() + "/inputs"; });
    op.outputs = refs_from_binary(in, t, [&] { return op_at() + "/outputs"; });
    op.deps.resize(in.count(sizeof(int64_t)));
    for (int64_t& d : op.deps)
      if ((d = in.number<int64_t>()) < 0 || d >= op.id) in.fail(op_at() + "/deps: " + std::to_string(d) + " is not an earlier op");
    op.fwd_op = in.optional();
    op.flops = in.poly([&] { return op_at() + "/flops"; });
    op.bytes = in.poly([&] { return op_at() + "/bytes"; });
  }
  if (!in.done()) in.fail("bytes after the last op");
  return t;
}

}  // namespace syssim
