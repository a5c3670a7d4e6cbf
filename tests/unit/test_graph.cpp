// The graph format: axis expressions, version checks, errors that name the JSON path,
// and deterministic output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/expr.hpp"
#include "common/graph.hpp"
#include "common/id_list.hpp"
#include "common/json_util.hpp"
#include "common/kernel_shape.hpp"
#include "common/symbol.hpp"
#include "trace_builder.hpp"

namespace syssim {
namespace {

TEST(AxisExpression, ParsesEvaluatesAndPrintsCanonically) {
  Poly p = Poly::parse("b*s*2*f + s^2 * b", "test");
  EXPECT_EQ(p.to_string(), "2*b*f*s + b*s^2");
  EXPECT_DOUBLE_EQ(p.evaluate({{"b", 3}, {"s", 10}, {"f", 7}}, "test"), 2 * 3 * 7 * 10 + 3 * 100);
  EXPECT_TRUE(p.contains_axis("f"));
  EXPECT_FALSE(p.contains_axis("h"));
  EXPECT_EQ((Poly::axis("h") * Poly::axis("h") + Poly::constant(0)).to_string(), "h^2");
  EXPECT_EQ(Poly::parse("0", "test").to_string(), "0");
}

TEST(AxisExpression, ErrorsNameThePlaceAndTheText) {
  try {
    Poly::parse("2*s+", "/trace/ops/4/flops");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/trace/ops/4/flops: bad axis expression '2*s+': unexpected end");
  }
  try {
    Poly::parse("s*b", "x").evaluate({{"s", 1}}, "/shard");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/shard: axis 'b' has no value");
  }
  // An exponent past int's range was 0 (the axis dropped, 0 FLOPs); a large one overflows.
  for (const char* text : {"2*s^4294967296", "s^17", "s^0", "s^1.5"}) {
    try {
      Poly::parse(text, "/trace/ops/1/flops");
      FAIL() << text;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("must be a whole number from 1 to 16"), std::string::npos) << e.what();
    }
  }
  try {
    Poly::parse("s^16*b^16", "x").evaluate({{"s", 1e20}, {"b", 1e20}}, "/shard/ops/3");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "/shard/ops/3: axis expression 'b^16*s^16' overflows");
  }
}

// A kernel shape keeps its dims in name order whatever order they come in, so that two
// shapes of the same dims are equal and JSON writes them as std::map did.
TEST(AxisValues, OrderNamesAsStdStringDoes) {
  std::vector<std::string> names{"s", "s_q", "b", "\xff", "h", "ab", "a", "", "s_kv", "S"};
  std::vector<std::string> by_string = names, by_axis = names;
  std::sort(by_string.begin(), by_string.end());
  std::sort(by_axis.begin(), by_axis.end(), AxisNameLess{});
  EXPECT_EQ(by_axis, by_string);
  AxisValues values{{"s_q", 2}, {"s", 1}};
  EXPECT_EQ(values.begin()->first, "s");
  EXPECT_DOUBLE_EQ(values.at("s_q"), 2);
}

TEST(KernelShape, DimsInNameOrderAndAJsonObject) {
  KernelShape shape{{"n", 2}, {"m", 1}};
  shape["k"] = 3;
  shape["m"] += 10;
  EXPECT_EQ(shape, (KernelShape{{"k", 3}, {"m", 11}, {"n", 2}}));
  EXPECT_EQ(shape.size(), 3u);
  EXPECT_EQ(shape.count("k"), 1u);
  EXPECT_EQ(shape.count("rows"), 0u);
  EXPECT_DOUBLE_EQ(shape.at("m"), 11);
  EXPECT_THROW(shape.at("rows"), std::out_of_range);
  EXPECT_LT((KernelShape{{"k", 3}}), (KernelShape{{"k", 4}}));
  const nlohmann::json j = shape;
  EXPECT_EQ(j.dump(), R"({"k":3.0,"m":11.0,"n":2.0})");
  EXPECT_EQ(j.get<KernelShape>(), shape);
  nlohmann::ordered_json ordered = shape;
  EXPECT_EQ(ordered.dump(), j.dump());
  EXPECT_THROW(nlohmann::json({{"m", "one"}}).get<KernelShape>(), nlohmann::json::type_error);
}

TEST(IdList, BehavesAsAVectorInlineOrOnTheHeap) {
  IdList ids{4, 2};
  ids.push_back(7);  // three: still inline
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 2, 7}));
  ids.push_back(1);  // four: moved to the heap, the order kept
  const std::vector<int64_t> nine{9}, more{5, 6};
  ids.insert(ids.begin() + 1, nine.begin(), nine.end());
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 9, 2, 7, 1}));
  ids.insert(ids.end(), more.begin(), more.end());
  ids.erase(ids.begin(), ids.begin() + 2);
  EXPECT_EQ(ids, (std::vector<int64_t>{2, 7, 1, 5, 6}));
  EXPECT_EQ(ids.at(4), 6);
  EXPECT_THROW(ids.at(5), std::out_of_range);

  // Copies and moves, from the heap and from inline, leave the source as std::vector would.
  IdList copy = ids;
  IdList moved = std::move(copy);
  EXPECT_TRUE(copy.empty());
  EXPECT_EQ(moved, ids);
  IdList small{3};
  IdList small_moved = std::move(small);
  EXPECT_EQ(small_moved, (std::vector<int64_t>{3}));
  moved = small_moved;  // heap to inline
  EXPECT_EQ(moved, (std::vector<int64_t>{3}));
  moved.pop_back();
  EXPECT_TRUE(moved.empty());
  moved.resize(4, 8);
  EXPECT_EQ(moved, (std::vector<int64_t>{8, 8, 8, 8}));

  const nlohmann::json j = ids;
  EXPECT_EQ(j.dump(), "[2,7,1,5,6]");
  EXPECT_EQ(j.get<IdList>(), ids);
  EXPECT_THROW(nlohmann::json({1, "two"}).get<IdList>(), nlohmann::json::type_error);
}

TEST(Symbol, EqualTextsAreOneSymbolAndOrderByText) {
  const std::string built = std::string("micro") + "batch";
  Symbol a("microbatch"), b(built), c("step");
  EXPECT_EQ(&a.str(), &b.str());  // one interned text
  EXPECT_TRUE(a == b && a == "microbatch" && a == built && "microbatch" == a);
  EXPECT_TRUE(a != c && a != "microbatc" && a != "microbatchX" && a != "");
  EXPECT_TRUE(Symbol() == "" && Symbol().empty() && Symbol("") == Symbol());
  // Ordered by text whatever the order of interning: "zz" first, then "aa".
  Symbol z("zz-symbol-test"), y("aa-symbol-test");
  EXPECT_TRUE(y < z && !(z < y) && !(z < z));
  std::map<Symbol, int> by_name{{z, 1}, {y, 2}};
  EXPECT_EQ(by_name.begin()->first, "aa-symbol-test");
  EXPECT_EQ("layer." + c + ".x", "layer.step.x");
  nlohmann::json j = c;
  EXPECT_EQ(j, "step");
  EXPECT_EQ(j.get<Symbol>(), c);
}

TEST(Symbol, ThreadsInterningTheSameTextsGetTheSameSymbols) {
  const int kTexts = 2000;
  std::vector<std::vector<const std::string*>> seen(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTexts; ++i) seen[t].push_back(&Symbol("threaded-" + std::to_string(i)).str());
    });
  for (auto& thread : threads) thread.join();
  for (size_t t = 1; t < seen.size(); ++t) EXPECT_EQ(seen[t], seen[0]);
  for (int i = 0; i < kTexts; ++i) EXPECT_EQ(*seen[0][i], "threaded-" + std::to_string(i));
}


// Module paths as lib/trace names Megatron-Core's modules, read by hand.
TEST(Symbol, KnowsWhatItsModulePathSays) {
  auto path = [](const char* text) { return Symbol(text).module_path(); };
  EXPECT_EQ(path("decoder.layers.3").layer_part, LayerPart::residual);
  EXPECT_EQ(path("decoder.layers.3.input_layernorm").layer_part, LayerPart::attention);
  EXPECT_EQ(path("decoder.layers.3.self_attention.core_attention").layer_part, LayerPart::attention);
  EXPECT_EQ(path("decoder.layers.3.pre_mlp_layernorm").layer_part, LayerPart::pre_mlp_norm);
  EXPECT_EQ(path("decoder.layers.3.mlp.router").layer_part, LayerPart::router);
  EXPECT_EQ(path("decoder.layers.3.mlp.token_dispatcher").layer_part, LayerPart::dispatch);
  EXPECT_EQ(path("decoder.layers.3.mlp.experts.linear_fc1").layer_part, LayerPart::mlp);
  EXPECT_EQ(path("mtp.layers.0.transformer_layer.mlp.router").layer_part, LayerPart::other);  // not a decoder layer
  EXPECT_EQ(path("output_layer").layer_part, LayerPart::other);

  // Components are whole names: mlp_bda holds no mlp, and the experts' activation is both.
  EXPECT_FALSE(path("decoder.layers.3.mlp_bda").has(ModuleComponent::mlp));
  const ModulePath act = path("decoder.layers.3.mlp.experts.activation_func");
  EXPECT_TRUE(act.has(ModuleComponent::mlp) && act.has(ModuleComponent::activation_func));
  EXPECT_FALSE(act.has(ModuleComponent::shared_experts) || act.has(ModuleComponent::core_attention));
  EXPECT_TRUE(path("decoder.layers.3.self_attention.linear_kv_up_proj").has(ModuleComponent::linear_kv_up_proj));

  // The shared experts and the dispatcher name their MoE layer's path by its length.
  const ModulePath fc2 = path("mtp.layers.0.transformer_layer.mlp.shared_experts.linear_fc2");
  EXPECT_EQ(fc2.shared_expert_layer_length, std::string("mtp.layers.0.transformer_layer.mlp").size());
  EXPECT_TRUE(fc2.shared_expert_fc2);
  EXPECT_FALSE(path("decoder.layers.3.mlp.shared_experts.linear_fc1").shared_expert_fc2);
  EXPECT_EQ(path("decoder.layers.3.mlp.token_dispatcher").token_dispatcher_layer_length, 20u);
  EXPECT_EQ(path("decoder.layers.3.mlp.token_dispatcher.x").token_dispatcher_layer_length, 0u);
  EXPECT_EQ(path("decoder.layers.3.mlp").shared_expert_layer_length, 0u);

  EXPECT_TRUE(path("embedding").embedding && path("embedding.word_embeddings").embedding);
  EXPECT_FALSE(path("embeddings").embedding || path("mtp.layers.0.embedding").embedding);
}
TEST(GraphDocument, RoundTripsByteForByte) {
  Graph g;
  g.provenance.push_back(Provenance{"syssim-trace", "0.1.0", {"m.yaml"}});
  g.other_sections["mine"] = {{"x", 1}};
  std::string text = write_graph(g);
  EXPECT_EQ(write_graph(read_graph(text, "<stdin>")), text);
  EXPECT_NE(text.find("\"format\":\"syssim-graph\""), std::string::npos);
  EXPECT_NE(text.find("\"mine\":{\"x\":1}"), std::string::npos);
}

std::string error_of(const std::string& text) {
  try {
    read_graph(text, "<stdin>");
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

// An integer field takes whole numbers in its type's range only: nlohmann's get would truncate
// 1.5 to 1 and wrap 2^63 to -2^63.
TEST(GraphDocument, IntegerFieldsAreWholeAndInRange) {
  const json j = json::parse(R"({"big": 9223372036854775808, "half": 1.5, "low": -1, "top": 9223372036854775807,
                                  "float": 32.0, "float_big": 9.223372036854775808e18, "float_low": -9.223372036854775808e18,
                                  "float_unsigned": -1.0})");
  auto error_of_key = [&](const std::string& key) -> std::string {
    try {
      require_as<int64_t>(j, key, "/x");
    } catch (const DataError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of_key("big"), "graph: /x/big: expected a whole number that fits 64 bits, got 9223372036854775808");
  EXPECT_EQ(error_of_key("half"), "graph: /x/half: expected a whole number that fits 64 bits, got 1.5");
  EXPECT_EQ(require_as<int64_t>(j, "low", "/x"), -1);
  EXPECT_EQ(require_as<int64_t>(j, "top", "/x"), INT64_MAX);
  // JSON has one kind of number: a whole value written with a fraction of zeros is that number,
  // within the type's range (2^63 is not an int64; -2^63 is; -1 is no uint64).
  EXPECT_EQ(require_as<int64_t>(j, "float", "/x"), 32);
  EXPECT_EQ(error_of_key("float_big"), "graph: /x/float_big: expected a whole number that fits 64 bits, got 9.223372036854776e+18");
  EXPECT_EQ(require_as<int64_t>(j, "float_low", "/x"), INT64_MIN);
  try {
    require_as<uint64_t>(j, "float_unsigned", "/x");
    ADD_FAILURE() << "-1.0 read as a uint64";
  } catch (const DataError&) {
  }
}

TEST(GraphDocument, RefusesBadInputWithOneLine) {
  EXPECT_EQ(error_of(""), "<stdin>: empty input, expected a syssim graph (did the stage before it in the pipe fail?)");
  EXPECT_EQ(error_of("{\"format\": \"syssim-gr"), "<stdin>: truncated JSON: input ends after 21 bytes");
  EXPECT_EQ(error_of("{\"format\" = 1}"), "<stdin>: not valid JSON at byte 11");
  EXPECT_EQ(error_of("name: llama\nnum_layers: 2\n"),
            "<stdin>: not a syssim graph (a JSON object that syssim-trace or a later stage writes); a model goes to syssim-trace");
  EXPECT_EQ(error_of("{\"format\": \"syssim-graph\", \"x\": 1e400}"), "<stdin>: not valid JSON: number overflow parsing '1e400'");
  EXPECT_EQ(error_of("{\"x\": " + std::string(400, '9') + "e400}"),
            "<stdin>: not valid JSON: number overflow parsing '" + std::string(55, '9') + "...'");
  EXPECT_EQ(error_of("{\"format\": \"other\"}"), "<stdin>: /format: expected \"syssim-graph\", got \"other\"");
  EXPECT_EQ(error_of("{\"format\": \"syssim-graph\", \"version\": \"2.0\", \"provenance\": []}"),
            "<stdin>: /version: graph format 2.0 is not supported (this syssim reads 1.x)");
  EXPECT_EQ(error_of("{\"format\": \"syssim-graph\", \"version\": \"1.7\", \"provenance\": [], \"sim\": {}}"),
            "<stdin>: graph: /sim: missing key 'step_time_ms'");
}

TEST(GraphDocument, MissingSectionTellsWhichStageToRun) {
  Graph g;
  try {
    need_section(g.shard, "shard", "syssim-shard");
    FAIL();
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "graph has no 'shard' section: run syssim-shard first");
  }
}

// A shard section of pp 2 with 2 chunks per rank and 2 micro-batches: one op, on rank 1's
// chunk 1, and its forward slots.
ShardSection small_pipeline() {
  ShardSection s;
  s.parallelism.pp = 2;
  s.parallelism.vpp = 2;
  s.num_microbatches = 2;
  s.training.global_batch = 2;  // micro-batch 1, dp 1
  ShardOp op;
  op.name = "aten::add";
  op.kind = OpKind::math;
  op.phase = OpPhase::fwd;
  op.scope = OpScope::microbatch;
  op.pass = OpPass::forward;
  op.stage = 1;
  op.chunk = 1;
  op.stream = Stream::compute;
  op.dtype = "bf16";
  s.ops.push_back(op);
  s.pp_layout = {1, 1, 1, 1};
  s.stage_params_local = {0, 0};
  s.schedule = {{}, {{1, 0, OpPass::forward}, {1, 1, OpPass::forward}}};
  return s;
}

// A chunk, pipeline rank or size the job does not have is refused where the section is read,
// before anything is sized by it: one line naming the JSON path and the value.
TEST(ShardSection, RefusesChunksRanksAndSizesNoJobHas) {
  auto error_of = [](const std::string& pointer, const nlohmann::json& value) -> std::string {
    nlohmann::json j = to_json(small_pipeline());
    j[nlohmann::json::json_pointer(pointer)] = value;
    try {
      shard_from_json(j, "/shard");
    } catch (const DataError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of("/ops/0/chunk", 1), "no error");
  EXPECT_EQ(error_of("/ops/0/chunk", -1), "graph: /shard/ops/0/chunk: chunk -1 does not exist (vpp=2)");
  EXPECT_EQ(error_of("/ops/0/chunk", INT64_MAX),
            "graph: /shard/ops/0/chunk: chunk 9223372036854775807 does not exist (vpp=2)");
  EXPECT_EQ(error_of("/ops/0/stage", -1), "graph: /shard/ops/0/stage: pipeline rank -1 does not exist (pp=2)");
  EXPECT_EQ(error_of("/ops/0/stage", 100000000),
            "graph: /shard/ops/0/stage: pipeline rank 100000000 does not exist (pp=2)");
  EXPECT_EQ(error_of("/schedule/1/0/chunk", 2), "graph: /shard/schedule/1/0/chunk: chunk 2 does not exist (vpp=2)");
  EXPECT_EQ(error_of("/schedule/1/1/microbatch", 2),
            "graph: /shard/schedule/1/1/microbatch: micro-batch 2 does not exist (num_microbatches=2)");
  // Each parallel size is at most 2^20 (parallelism_from_json), and so is their product.
  EXPECT_EQ(error_of("/parallelism/dp", 1 << 20),
            "graph: /shard/parallelism: tp*cp*dp*pp=1*1*1048576*2 GPUs, more than the 1048576 a job can have");
  // A rank runs at most 2^20 passes of a micro-batch through a chunk per step: 2^19 with 2 chunks.
  EXPECT_EQ(error_of("/num_microbatches", 1 << 20),
            "graph: /shard/num_microbatches: expected 1 to 524288, got 1048576");
  // The micro-batches the global batch makes, as the throughput figures read it.
  EXPECT_EQ(error_of("/num_microbatches", 3),
            "graph: /shard/num_microbatches: 3, but global_batch / (micro_batch * dp) = 2 / (1 * 1)");
  // An op's kind is one of the six, parsed once here.
  EXPECT_EQ(error_of("/ops/0/kind", "conv"),
            "graph: /shard/ops/0/kind: expected gemm, attention, math, memory, collective, optimizer or host_copy, got \"conv\"");
  EXPECT_EQ(error_of("/ops/0/kind", "gemm"), "no error");
}

// The trace cache's binary form: the same section back, and a damaged entry refused (the
// driver then traces again) instead of read as a wrong trace.
TEST(TraceBinary, RoundTripsAndRefusesDamagedBytes) {
  testing::TraceBuilder t(testing::dense_model("m", 1, 64, 4, 2, 256, 32, 100), "decoder.layers.0.mlp");
  testing::add_mlp_tensors(t);
  t.op("syssim::linear", "gemm", "fwd", "column", {testing::ref(1, {"s", "b", "h"}), testing::ref(2, {"f", "h"})},
       {testing::ref(3, {"s", "b", "f"})}, "2*s*b*f*h", "2*s*b*h + 2*f*h + 2*s*b*f");
  t.op("aten::silu_backward", "math", "bwd", "none", {testing::ref(6, {"s", "b", "h"}, "fp32")},
       {testing::ref(7, {"s", "b", "f"})}, "s^2*b + 3", "0", 0);
  t.trace.ops[1].deps = {0};
  t.trace.ops[1].layer = std::nullopt;
  const std::string bytes = trace_to_binary(t.trace);
  EXPECT_EQ(to_json(trace_from_binary(bytes, "entry")), to_json(t.trace));

  for (size_t cut : {size_t{0}, size_t{7}, bytes.size() / 2, bytes.size() - 1})
    EXPECT_THROW(trace_from_binary(bytes.substr(0, cut), "entry"), DataError) << cut;
  EXPECT_THROW(trace_from_binary(bytes + "x", "entry"), DataError);
  EXPECT_THROW(trace_from_binary(to_json(t.trace).dump(), "entry"), DataError);
  try {
    trace_from_binary(bytes.substr(0, bytes.size() - 1), "entry");
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("entry: ends early", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace syssim
