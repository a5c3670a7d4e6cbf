// Configuration objects of ../shared/spec/api.md: model architecture, hardware,
// parallelism and training. Loaders validate strictly (see docs/configs.md).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/op_kinds.hpp"

namespace syssim {

struct ModelConfig {
  std::string name;
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  int64_t num_query_groups = 0;  // defaults to num_attention_heads (MHA)
  int64_t kv_channels = 0;       // head dim; defaults to hidden_size / heads
  int64_t ffn_hidden_size = 0;
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;
  int64_t vocab_size = 0;
  int64_t make_vocab_size_divisible_by = 128;
  bool swiglu = true;               // gated SwiGLU MLP; false: a plain MLP with `activation`
  std::string activation = "gelu";  // the plain MLP's activation: gelu | squared_relu
  bool rope = true;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  double rms_norm_eps = 1e-6;
  std::string normalization = "RMSNorm";  // RMSNorm | LayerNorm
  bool add_bias_linear = false;
  bool add_qkv_bias = false;
  bool qk_layernorm = false;
  // flash: the fused flash attention the hardware's attention pricing stands for (Transformer
  // Engine's, cuDNN's on Hopper); flash2: Dao's FlashAttention-2 (PyTorch SDPA's flash
  // backend); triton: flash-attn's Triton FlashAttention (llm-foundry's attn_impl triton);
  // unfused: Megatron's batched GEMMs around a softmax (docs/configs.md).
  std::string attention_backend = "flash";
  bool masked_softmax_fusion = true;  // unfused: Megatron's fused softmax kernel where its shapes allow it
  // Fused kernels Megatron-LM can turn off (--no-bias-swiglu-fusion, --no-rope-fusion) and
  // Transformer Engine's fused RMSNorm; off, the eager PyTorch chain of separate kernels
  // (docs/syssim-trace.md, "Unfused kernels").
  bool bias_swiglu_fusion = true;
  // GPT-OSS's clamped GLU (Megatron-Core's activation_func_clamp_value): the routed experts'
  // gate half capped at +v and linear half clamped to [-v, v] before the fused kernel; 0: none.
  double activation_func_clamp_value = 0;
  bool apply_rope_fusion = true;
  bool rms_norm_fusion = true;
  // Every backend but unfused runs one flash-style kernel per attention (same FLOPs and bytes).
  bool flash_attention() const { return attention_backend != "unfused"; }
  // Megatron-Core's fused linears: QKV as one GEMM and, with SwiGLU, fc1 as the gate and up
  // projections stacked; false: each its own linear, as torchtitan's Llama (wq, wk, wv; w1, w3).
  bool projection_fusion = true;
  // The loss: vocab_parallel, Megatron-Core's vocab-parallel cross entropy (fp32 in place, the
  // softmax kept for backward); torch_fp32, torch.nn.functional.cross_entropy of the logits cast
  // to fp32 (torchtitan's loss): the fp32 copy, log-softmax and NLL, each with its backward.
  std::string cross_entropy = "vocab_parallel";
  double hidden_dropout = 0.0;     // after attention and after the MLP (Megatron's hidden_dropout)
  double attention_dropout = 0.0;  // on the attention probabilities (Megatron's attention_dropout)

  // Mixture of experts (Megatron-Core's names, docs/configs.md "Mixture of experts"); no experts:
  // every layer's MLP is dense.
  int64_t num_moe_experts = 0;
  int64_t moe_router_topk = 2;
  int64_t moe_ffn_hidden_size = 0;                  // each routed expert's FFN width
  int64_t moe_shared_expert_intermediate_size = 0;  // the shared experts' FFN width; 0: none
  std::vector<int> moe_layer_pattern;               // per layer: 1 MoE, 0 dense (moe_layer_freq resolved)
  std::string moe_router_score_function = "softmax";  // softmax | sigmoid
  int64_t moe_router_num_groups = 0;                // DeepSeek's group-limited routing; 0: off
  int64_t moe_router_group_topk = 0;
  bool moe_router_enable_expert_bias = false;       // DeepSeek-V3's aux-loss-free score bias
  std::string moe_router_load_balancing_type = "aux_loss";  // aux_loss | seq_aux_loss | global_aux_loss | none
  // The router's GEMMs in fp32 (Megatron-Core's moe_router_dtype: fp32 logits, a backward in
  // fp32); empty: the input's dtype.
  std::string moe_router_dtype;
  // Multi-head latent attention (DeepSeek-V2/V3); then kv_channels is qk_head_dim + qk_pos_emb_head_dim.
  bool multi_latent_attention = false;
  int64_t q_lora_rank = 0;  // 0: queries projected from the hidden state directly
  int64_t kv_lora_rank = 0;
  int64_t qk_head_dim = 0;          // the part of a query/key head without RoPE
  int64_t qk_pos_emb_head_dim = 0;  // the RoPE part
  int64_t v_head_dim = 0;
  int64_t mtp_num_layers = 0;  // multi-token prediction layers after the decoder (DeepSeek-V3)
  // Sliding-window attention: layers with sliding_window_pattern[i] == 1 attend to the
  // window_size keys before each query and the query's own (Megatron's (window_size, 0), as
  // Transformer Engine counts it, and window_attn_skip_freq resolved); 0: full attention.
  int64_t window_size = 0;
  std::vector<int> sliding_window_pattern;
  std::string softmax_type = "vanilla";  // vanilla | learnable (a learned sink logit per head, GPT-OSS)

  bool is_moe() const { return num_moe_experts > 0; }
  bool is_moe_layer(int64_t layer) const { return is_moe() && moe_layer_pattern.at(layer) == 1; }
  bool is_sliding_window_layer(int64_t layer) const {
    return window_size > 0 && sliding_window_pattern.at(layer) == 1;
  }
};

// Whether the unfused attention runs Megatron's fused scale-mask-softmax kernel at this
// sequence length (FusedScaleMaskSoftmax.is_kernel_available: 16 < s <= 4096, s % 4 == 0)
// rather than PyTorch's fp32 softmax; false with flash attention (docs/syssim-trace.md).
bool runs_fused_softmax_kernel(const ModelConfig& model, int64_t seq_length);

// Whether the model's sliding window is shorter than a sequence of `seq_length` tokens: a window
// of window_size + 1 keys that holds the whole sequence is full causal attention.
bool window_slides_at(const ModelConfig& model, int64_t seq_length);
// Whether tp ranks can split the model's query groups as Megatron-Core does: g/tp groups each
// when tp divides them, else (tp a multiple of g) one group's KV head on each of tp/g ranks.
bool tp_splits_query_groups(const ModelConfig& model, int64_t tp);
// The model as traced for a sequence of `seq_length` tokens: that seq_length, and no sliding
// window where the window holds the whole sequence (its layers are full causal attention).
ModelConfig traced_at(const ModelConfig& model, int64_t seq_length);

// One tier of the cluster network, innermost first (docs/network.md): level 0 is the NVLink domain
// of a node, the levels above it the scale-out network (rail/leaf switches, spines, ...).
struct TopologyLevel {
  std::string kind;
  int64_t size = 0;  // GPUs in one domain of this level; 0 above level 0: the whole cluster
  double bandwidth_GBps = 0;  // per GPU, one direction: the line rate
  double latency_us = 0;
  double efficiency = 1;      // share of the line rate NCCL's protocols deliver (bus bandwidth / line rate)
  // Downlink to uplink capacity of the switches below this level: when every GPU of a domain of
  // the level below sends through this level at once, each gets bandwidth / oversubscription.
  double oversubscription = 1;
  // Bus bandwidth of NCCL's NVLink SHARP all-reduce over the whole domain; none: no NVLS.
  std::optional<double> nvls_bus_bandwidth_GBps = std::nullopt;
  // Share of the line rate NCCL's all-to-all delivers on this level (its point-to-point
  // exchanges reach less than the rings `efficiency` describes); none: `efficiency`.
  std::optional<double> alltoall_efficiency = std::nullopt;
};

// A collective as nccl-tests names it (lib/network prices these), and the algorithms
// lib/network prices them with; the hardware key collective_algorithm may force one of a
// collective's algorithms, or auto (the fastest predicted). flex is no NCCL algorithm: the flex
// token dispatcher's kernels (DeepEP's, HybridEP's), the one way its exchange is priced.
enum class NcclCollective : uint8_t { all_reduce, all_gather, reduce_scatter, alltoall, broadcast, sendrecv };
enum class CollectiveAlgorithm : uint8_t { ring, tree, nvls, hierarchical, pairwise, p2p, flex };
template <>
struct EnumNames<NcclCollective> {
  static constexpr std::array<const char*, 6> kNames = {"all_reduce", "all_gather", "reduce_scatter",
                                                        "alltoall",   "broadcast",  "sendrecv"};
};
template <>
struct EnumNames<CollectiveAlgorithm> {
  static constexpr std::array<const char*, 7> kNames = {"ring",     "tree", "nvls", "hierarchical",
                                                        "pairwise", "p2p",  "flex"};
};
// The algorithms lib/network prices `collective` with.
const std::vector<CollectiveAlgorithm>& algorithms_of(NcclCollective collective);

struct HardwareConfig {
  std::string name;
  std::string file;  // the YAML it was read from; empty when read from a graph (not a graph key)
  // How errors name it: its name, and its file where the file's name is not that name (a
  // copy of a preset that kept the preset's name).
  std::string label() const;
  double peak_tflops_mm = 0;
  double peak_tflops_math = 0;
  double peak_memory_bandwidth_GBps = 0;
  int64_t gpus_per_node = 0;
  std::optional<double> peak_tflops_mm_fp8;
  std::optional<double> peak_tflops_mm_fp4;
  std::optional<double> sfu_peak;
  std::optional<double> gpu_memory_GB;
  std::optional<double> inter_node_bandwidth_GBps;
  // One direction of the GPU's link to its host's memory (PCIe, NVLink-C2C): what activation
  // offloading copies over; none: the job cannot offload.
  std::optional<double> host_link_GBps;
  // How much longer a compute-stream kernel takes while a collective of its GPU runs (NCCL's
  // kernels take SMs and memory bandwidth): 0.2 is 20% longer; 0: no slowdown.
  double compute_slowdown_under_communication = 0.0;
  double inter_node_latency_us = 0.0;
  double kernel_launch_us = 0.0;
  // The CPU thread that issues the kernels (docs/syssim-sim.md, "The host"); all 0: not simulated.
  struct Host {
    double op_us = 0;      // one PyTorch op call, its first kernel launch included
    double module_us = 0;  // one Transformer Engine module call (linear, attention), likewise
    double launch_us = 0;  // each further kernel a call launches
    bool simulated() const { return op_us > 0 || module_us > 0 || launch_us > 0; }
  } host;
  // Device memory outside PyTorch's caching allocator (docs/memory.md "Memory outside the
  // allocator"): the CUDA context, and NCCL's connection buffers, sized from the channels NCCL
  // opens on this system; no channels given: NCCL's buffers are not counted.
  double cuda_context_GB = 0;
  struct NcclChannels {
    int64_t coll_in_node = 0;                // ring channels of a communicator inside one node
    int64_t coll_across_nodes = 0;           // ... of one spanning nodes
    int64_t p2p_per_peer_in_node = 0;        // send/recv channels per peer, communicator inside one node
    int64_t p2p_per_peer_across_nodes = 0;   // ... spanning nodes
    int64_t p2p_across_nodes = 0;            // send/recv channels of a communicator spanning nodes
    int64_t nvls = 0;                        // NVLink SHARP channels; 0: no NVLS
    bool given() const {
      return coll_in_node > 0 || coll_across_nodes > 0 || p2p_per_peer_in_node > 0 || p2p_per_peer_across_nodes > 0 ||
             p2p_across_nodes > 0 || nvls > 0;
    }
  } nccl_channels;
  std::vector<TopologyLevel> topology;  // innermost level first
  // Collective -> the algorithm to use instead of the fastest one; none: auto.
  std::map<NcclCollective, CollectiveAlgorithm> collective_algorithm;
  // Block-scaled low-precision formats the tensor cores run natively (Blackwell): mxfp8, nvfp4.
  std::vector<std::string> block_scaled_formats;
  // Uncalibrated estimator: the share of the roofline each op family reaches (gemm, attention,
  // norm, elementwise, reduction); a family not listed reaches 1 (docs/syssim-cost.md).
  std::map<std::string, double> efficiency;
  // Flash attention kernels other than the one attention is priced as: each one's time over
  // that price, forward and backward (attention_backend flash2, triton; docs/syssim-cost.md).
  struct AttentionKernelTime {
    double forward = 1, backward = 1;
  };
  std::map<std::string, AttentionKernelTime> attention_kernels;
  // FP8 GEMMs priced without a bundle: their 16-bit time over this measured speed-up, instead
  // of the time at the FP8 peak (docs/syssim-cost.md); none: the FP8 peak.
  std::optional<double> fp8_gemm_speedup;
  // FP4 GEMMs priced from their FP8 twin's calibrated time: that time over this measured
  // speed-up, instead of over the ratio of the two peaks (docs/syssim-cost.md).
  std::optional<double> fp4_gemm_speedup;
  std::string calibrated_model;      // as written in the YAML (relative to its folder), or ""
  std::string calibrated_model_dir;  // that path resolved when the YAML was read; not in the graph
  // The families priced with the bundle (empty: every family it has); the others use efficiency.
  std::vector<std::string> calibrated_families;
};

// The op families of the cost estimators.
extern const std::vector<std::string> kOpFamilies;
// The attention backends priced as a factor of the hardware's flash attention.
extern const std::vector<std::string> kAttentionKernels;

struct ParallelismConfig {
  int64_t tp = 1;
  int64_t dp = 1;
  bool sp = false;
  int64_t cp = 1;
  int64_t pp = 1;
  std::optional<int64_t> vpp;
  // Megatron's rank order, fastest-varying dimension first (RankGenerator's `order`).
  std::string order = "tp-cp-ep-dp-pp";
  // Expert parallelism with Megatron-Core's parallel folding: the experts of an MoE layer are
  // split over ep ranks and each expert over etp ranks, on the same tp*cp*dp GPUs of a stage
  // (docs/parallelism.md "Expert parallelism"); none given: etp = tp, as Megatron-LM.
  int64_t ep = 1;
  std::optional<int64_t> etp;
  // Hybrid sharding (HSDP): the dp x cp data-parallel ranks form dp_replicate replicas, each of
  // which shards the training state over its dp x cp / dp_replicate ranks (torchtitan's
  // data_parallel_replicate_degree; docs/parallelism.md "Hybrid sharding"). 1: one shard group.
  int64_t dp_replicate = 1;
  int64_t world_size() const { return tp * dp * cp * pp; }
  // The ranks that shard the dense training state among them: dp x cp, or one replica's.
  int64_t dp_shard_group() const { return dp * cp / dp_replicate; }
  // Why tp*cp*dp*pp is more GPUs than a job can have (kMaxGpus), checked without overflow
  // for sizes up to kMaxGpus each; empty when it is not.
  std::string world_size_excess() const;
  int64_t expert_tp() const { return etp.value_or(tp); }
  // The expert-data-parallel size: the ranks of a stage holding the same experts.
  int64_t expert_dp() const { return tp * cp * dp / (ep * expert_tp()); }
};

// How data parallelism shards the training state, in Megatron-FSDP's names
// (docs/parallelism.md "Sharded data parallelism"): nothing (DDP), the optimizer state (ZeRO-1,
// Megatron-LM's distributed optimizer), also the gradients (ZeRO-2), also the weights (ZeRO-3,
// FSDP's FULL_SHARD).
enum class DataParallelSharding { no_shard, optim, optim_grads, optim_grads_params };
// The strategy named `name` (also zero1/zero2/zero3, full_shard, shard_grad_op); nullopt for
// any other name.
std::optional<DataParallelSharding> parse_data_parallel_sharding(const std::string& name);
const char* to_string(DataParallelSharding sharding);

// Whose schedule the sharded strategies follow (docs/parallelism.md "Sharded data parallelism"):
// Megatron-FSDP's (also PyTorch FSDP1's), or PyTorch FSDP2's as torchtitan runs it.
enum class FsdpImplementation { megatron, fsdp2 };
std::optional<FsdpImplementation> parse_fsdp_implementation(const std::string& name);
const char* to_string(FsdpImplementation implementation);

// What Megatron captures in CUDA graphs (Megatron-LM's --cuda-graph-scope): the whole
// forward-backward iteration (cuda_graph_impl local), or, with Transformer Engine's graphed
// callables, each layer's attention, dense MLP, whole MoE layer, MoE router, or the token
// dispatcher's preprocessing (docs/syssim-sim.md, "The host").
enum class CudaGraphScope : uint8_t { full_iteration, attn, mlp, moe, moe_router, moe_preprocess };
template <>
struct EnumNames<CudaGraphScope> {
  static constexpr std::array<const char*, 6> kNames = {"full_iteration", "attn",       "mlp",
                                                        "moe",            "moe_router", "moe_preprocess"};
};

// The dtype of Adam's state (docs/memory.md "Optimizer state"): its two moments and its master
// weights, fp32 or a 16-bit type whose master weights are the 16-bit weights themselves.
enum class OptimizerStateDtype : uint8_t { fp32, bf16, fp16 };
template <>
struct EnumNames<OptimizerStateDtype> {
  static constexpr std::array<const char*, 3> kNames = {"fp32", "bf16", "fp16"};
};

struct TrainingConfig {
  int64_t micro_batch = 1;
  int64_t global_batch = 1;
  std::optional<int64_t> seq_length;  // overrides the model's seq_length
  std::string dtype = "bf16";         // bf16 | fp16 | fp8 | fp4 (docs/syssim-shard.md "Low precision")
  // Transformer Engine's scaling recipe of fp8/fp4 linears: delayed | current | mxfp8 (fp8),
  // nvfp4 (fp4); none given: delayed for fp8, nvfp4 for fp4.
  std::optional<std::string> fp8_recipe;
  bool fp8_param_gather = false;      // fp8 weights as the parameters, all-gathered in fp8
  std::string recompute = "none";     // none | selective | full
  std::vector<std::string> recompute_modules;  // selective: core_attn | mlp | layernorm | moe_act (none given: core_attn)
  std::optional<std::string> recompute_method;  // full: uniform | block (default uniform)
  std::optional<int64_t> recompute_num_layers;  // full: layers per checkpoint (uniform) or checkpointed (block); default 1
  bool distributed_optimizer = false;
  // optim_grads and optim_grads_params: Megatron-FSDP's per-layer reduce-scatters (and
  // all-gathers) in every micro-batch; they imply the distributed optimizer, which alone is
  // optim (normalize_sharding keeps the two fields consistent).
  DataParallelSharding data_parallel_sharding = DataParallelSharding::no_shard;
  bool shards_gradients() const { return data_parallel_sharding >= DataParallelSharding::optim_grads; }
  // Whether `dtype` and `recompute` are settings syssim simulates (the flags' and a graph's
  // checks refuse the others).
  bool known_dtype() const { return dtype == "bf16" || dtype == "fp16" || dtype == "fp8" || dtype == "fp4"; }
  bool known_recompute() const { return recompute == "none" || recompute == "selective" || recompute == "full"; }
  bool shards_weights() const { return data_parallel_sharding == DataParallelSharding::optim_grads_params; }
  FsdpImplementation fsdp_implementation = FsdpImplementation::megatron;
  // Megatron-LM's --grad-reduce-in-bf16 (Megatron-Core grad_reduce_in_fp32 false): the main
  // gradients are accumulated, reduced and kept in bf16 instead of fp32.
  bool grad_reduce_in_bf16 = false;
  double main_grad_bytes() const { return grad_reduce_in_bf16 ? 2 : 4; }
  // Adam's state: Apex DistributedFusedAdam's dtype (NeMo 1's optim.dtype); 16-bit: the moments
  // in that type and no master copy (NeMo's store_params false). store_param_remainders
  // (Megatron-LM's --store-param-remainders; Apex's and Transformer Engine's fused Adam): the
  // fp32 master weights kept as the 16 bits their bf16 weights lack.
  OptimizerStateDtype optimizer_state_dtype = OptimizerStateDtype::fp32;
  bool store_param_remainders = false;
  // The caching allocator's fragmentation: memory it holds but no tensor uses, as a share of the
  // tensors at the peak (reserved / allocated - 1, as torch.cuda.memory_stats gives them); counted
  // outside the tensors (docs/memory.md "Memory outside the allocator"). 0: none.
  double allocator_fragmentation = 0;
  // Bytes of optimizer state per parameter: master weights plus the two moments (12 for fp32).
  double optimizer_state_bytes() const;
  // The master weights' part of it (4 for fp32, 2 as remainders, 0 with 16-bit state).
  double master_weight_bytes() const;
  // Communication overlap (docs/syssim-shard.md "Communication overlap") and clipping.
  bool overlap_grad_reduce = false;           // DP gradient reduction per bucket, during backward
  bool overlap_param_gather = false;          // distributed optimizer's all-gather during the next forward
  std::optional<int64_t> ddp_bucket_size;     // parameters per bucket (default max(4e7, 1e6 * dp))
  bool tp_comm_overlap = false;               // TP collectives in chunks pipelined with their GEMMs
  double clip_grad = 1.0;                     // gradient-norm clipping threshold; 0 disables
  // Mixture of experts (docs/parallelism.md "Expert parallelism"): Megatron's token dispatcher
  // (alltoall | allgather | flex), token dropping, the routing skew simulated, and the shared
  // experts' overlap with the dispatch.
  std::string moe_token_dispatcher_type = "alltoall";
  std::optional<double> moe_expert_capacity_factor;  // none: dropless
  bool moe_pad_expert_input_to_capacity = false;
  // Megatron-Core's moe_router_padding_for_quantization: the router pads the routing map so
  // that each expert's count is a multiple of the low-precision GEMMs' rows, instead of
  // Transformer Engine padding the experts' rows (docs/syssim-shard.md "Low precision").
  bool moe_router_padding_for_quantization = false;
  double moe_imbalance = 1;  // the busiest expert's tokens over the mean (1: balanced routing)
  bool moe_shared_expert_overlap = false;
  // Megatron-Core's overlap_moe_expert_parallel_comm: the combined 1F1B schedule runs each
  // forward beside the backward of another micro-batch, so that one's all-to-alls run during
  // the other's compute (docs/parallelism.md "Expert parallelism").
  bool overlap_moe_expert_parallel_comm = false;
  // Megatron-Core's --cpu-offloading-num-layers (activations only): the tensors the first N
  // decoder layers save for backward wait in host memory between their forward and backward
  // passes (docs/memory.md "Activation offloading"); 0: none.
  int64_t cpu_offloading_num_layers = 0;
  // CUDA graphs: the scopes captured; none, eager (every op issued by the host).
  std::vector<CudaGraphScope> cuda_graph_scope;
  bool captures(CudaGraphScope scope) const {
    return std::find(cuda_graph_scope.begin(), cuda_graph_scope.end(), scope) != cuda_graph_scope.end();
  }
};

// The parallel dimensions in Megatron's rank order, fastest first, with their sizes: `order`
// names each of tp, cp, ep, dp, pp at most once, and every one larger than 1 (Megatron's
// RankGenerator); the ones it leaves out have size 1. Throws DataError naming the order.
std::vector<std::pair<std::string, int64_t>> rank_order(const ParallelismConfig& p);
// The names of an order alone, before any size is known: DataError for a name that is none of
// tp, cp, ep, dp, pp, or one given twice.
void check_order_names(const std::string& order);
// The same for the expert layers (parallel folding): tp is the expert-TP size, ep the
// expert-parallel size, dp the expert-data-parallel size, cp 1.
std::vector<std::pair<std::string, int64_t>> expert_rank_order(const ParallelismConfig& p);

// A layout in one line, as reports and `syssim validate` print it: "tp2+sp pp4 vpp2 cp2 ep8
// dp16 mbs1 gbs512", then the recomputation and a per-layer sharding strategy when there are.
std::string layout_text(const ParallelismConfig& p, const TrainingConfig& t);

// A model or hardware YAML file, or a preset by name (config/presets.hpp). A model YAML naming
// a Hugging Face model reads its config.json at `job_seq_length` when given (the sequence the
// job runs), else at its overrides' seq_length.
ModelConfig load_model_yaml(const std::string& name_or_path, std::optional<int64_t> job_seq_length = std::nullopt);
// A model argument of the tools: a Hugging Face model (a config.json file, a folder holding one,
// or an id org/name that is no path here; found as docs/configs.md says) at `seq_length`, which
// its config does not hold; else load_model_yaml at `seq_length`. DataError without seq_length
// for a Hugging Face model.
ModelConfig load_model(const std::string& argument, std::optional<int64_t> seq_length);
ModelConfig parse_model_yaml(const std::string& text, const std::string& name,
                             std::optional<int64_t> job_seq_length = std::nullopt);
HardwareConfig load_hardware_yaml(const std::string& name_or_path);
// A hardware's calibrated_model as a folder: itself when absolute, else taken from base_dir
// (the hardware YAML's folder); "" for none.
std::string resolve_calibrated_model(const std::string& calibrated_model, const std::string& base_dir);
// A relative calibrated_model is resolved against base_dir (default: the folder of `name`).
HardwareConfig parse_hardware_yaml(const std::string& text, const std::string& name, const std::string& base_dir = "");

// The recipe an fp8/fp4 run uses, its default resolved; none for bf16 and fp16.
std::optional<std::string> low_precision_recipe(const TrainingConfig& training);
// Refuses (UsageError) a block-scaled recipe (mxfp8, nvfp4) on hardware whose tensor cores
// do not run it (block_scaled_formats).
void check_precision_support(const HardwareConfig& hardware, const TrainingConfig& training);

// The dense tensor-core peak a GEMM of `dtype` runs at (fp32 on the vector units, no TF32):
// the roofline of GEMM and attention, and the peak MFU is taken against. Throws DataError when
// the hardware lacks the fp8 or fp4 peak.
double tensor_core_peak_tflops(const HardwareConfig& hw, const std::string& dtype);

// Checks value ranges that do not depend on parallelism; throws DataError.
void validate(const ModelConfig& model, const std::string& where);
void validate(const HardwareConfig& hardware, const std::string& where);

// Name of a config file without folders and extension ("configs/models/llama3-8b.yaml" -> "llama3-8b").
std::string stem_of(const std::string& path);

// JSON forms used in the graph (model and hardware sections) and the report.
nlohmann::json to_json(const ModelConfig& model);
ModelConfig model_from_json(const nlohmann::json& j, const std::string& path);
nlohmann::json to_json(const HardwareConfig& hardware);
HardwareConfig hardware_from_json(const nlohmann::json& j, const std::string& path);
nlohmann::json to_json(const ParallelismConfig& parallelism);
// More decoder layers than any model has (the deepest published LLMs have a few hundred): the
// readers refuse more as soon as the key is read, before per-layer lists and the trace are
// sized by it.
inline constexpr int64_t kMaxLayers = 10000;
// The most GPUs a job has, and so the largest parallel size: the readers refuse more before
// anything is sized by them.
inline constexpr int64_t kMaxGpus = int64_t{1} << 20;
// Each parallel size from 1 to kMaxGpus, else DataError naming the path.
ParallelismConfig parallelism_from_json(const nlohmann::json& j, const std::string& path);
nlohmann::json to_json(const TrainingConfig& training);
// The training keys to_json writes only when they are set (a sharding strategy beyond the
// distributed optimizer, CUDA graph scopes, settings off their defaults), each with the scalar
// it holds when absent (null: none); training_from_json reads them all.
extern const std::map<std::string, nlohmann::json> kTrainingKeysWhenSet;
TrainingConfig training_from_json(const nlohmann::json& j, const std::string& path);
// Makes distributed_optimizer and data_parallel_sharding agree: the distributed optimizer
// alone is optim; a sharding strategy turns the distributed optimizer on.
void normalize_sharding(TrainingConfig& training);

}  // namespace syssim
