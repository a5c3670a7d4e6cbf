// The parallelism and training flags shared by syssim-shard and the syssim driver.
#pragma once
#include <CLI/CLI.hpp>

#include "shard/shard.hpp"
#include "tool.hpp"

namespace syssim::tool {

// What Megatron-LM derives from the flags given, for those not given: the data-parallel size
// from the world size (--gpus over tp*cp*pp, where it divides; else the shard stage names the
// mismatch), then the global batch, one micro-batch per data-parallel rank.
inline void derive_unset_sizes(const CLI::App& app, ShardOptions& options) {
  ParallelismConfig& p = options.parallelism;
  const int64_t model_parallel = p.tp * p.cp * p.pp;
  if (options.gpus && app.count("--dp") == 0 && *options.gpus % model_parallel == 0) p.dp = *options.gpus / model_parallel;
  if (app.count("--global-batch") == 0) options.training.global_batch = options.training.micro_batch * p.dp;
}

inline void add_layout_flags(CLI::App& app, ShardOptions& options) {
  auto& p = options.parallelism;
  auto& t = options.training;
  app.add_option("--tp,--tensor-model-parallel-size", p.tp, "Tensor-parallel size")->check(kPositive);
  app.add_flag("--sp,--sequence-parallel", p.sp, "Sequence parallelism (with --tp > 1)");
  app.add_option("--dp", p.dp, "Data-parallel size")->check(kPositive);
  app.add_option("--cp,--context-parallel-size", p.cp, "Context-parallel size")->check(kPositive);
  app.add_option("--dp-replicate", p.dp_replicate,
                 "Hybrid sharding: replicas of the sharded state, each sharded over dp*cp/dp-replicate ranks "
                 "(default 1)")
      ->check(kPositive);
  app.add_option("--cp-comm-type", options.cp_comm_type, "K/V exchange of context parallelism: p2p or all_gather");
  app.add_option("--pp,--pipeline-model-parallel-size", p.pp, "Pipeline-parallel size")->check(kPositive);
  app.add_option("--ep,--expert-model-parallel-size", p.ep, "Expert-parallel size: the experts of an MoE layer split over ep ranks")
      ->check(kPositive);
  app.add_option("--etp,--expert-tensor-parallel-size", p.etp, "Expert-tensor-parallel size: each expert split over etp ranks (default: tp)")
      ->check(kPositive);
  app.add_option("--vpp,--num-virtual-stages-per-pipeline-rank", p.vpp, "Virtual pipeline stages per rank")->check(kPositive);
  app.add_option("--order", p.order,
                 "Rank order, fastest dimension first, as Megatron's (default tp-cp-ep-dp-pp; "
                 "--use-tp-pp-dp-mapping is tp-cp-ep-pp-dp)")
      ->check(CLI::Validator(
          [](std::string& order) -> std::string {
            try {
              check_order_names(order);
            } catch (const DataError& error) {
              return error.what();
            }
            return "";
          },
          "DIMS"));
  app.add_flag_callback("--use-tp-pp-dp-mapping", [&p] { p.order = "tp-cp-ep-pp-dp"; },
                        "Megatron-LM's flag: --order tp-cp-ep-pp-dp")
      ->excludes("--order");
  app.add_option_function<std::string>(
         "--pipeline-schedule",
         [&options](const std::string& name) { options.pipeline_schedule = parse_enum<ScheduleKind>(name); },
         "Pipeline schedule (default: interleaved with --vpp > 1, else 1f1b)")
      ->check(CLI::IsMember(names_of<ScheduleKind>()));
  app.add_option("--pp-layout", options.pp_layout, "Decoder layers per virtual pipeline stage, comma-separated")
      ->delimiter(',');
  app.add_option("--decoder-first-pipeline-num-layers", options.decoder_first_pipeline_num_layers,
                 "Decoder layers of the first pipeline rank (the others split the rest evenly)");
  app.add_option("--decoder-last-pipeline-num-layers", options.decoder_last_pipeline_num_layers,
                 "Decoder layers of the last pipeline rank (the others split the rest evenly)");
  app.add_flag("--account-for-embedding-in-pipeline-split", options.account_for_embedding_in_pipeline_split,
               "Count the embedding as a layer of the first virtual stage in the even split");
  app.add_flag("--account-for-loss-in-pipeline-split", options.account_for_loss_in_pipeline_split,
               "Count the output layer and loss as a layer of the last virtual stage in the even split");
  app.add_option("--gpus", options.gpus, "GPU count, tp*cp*pp*dp; without --dp, dp is gpus/(tp*cp*pp) as Megatron-LM derives it")
      ->check(kPositive);
  app.add_option("--micro-batch,--micro-batch-size", t.micro_batch, "Micro-batch size")->check(kPositive);
  app.add_option("--global-batch,--global-batch-size", t.global_batch, "Global batch size (default: micro-batch x dp, as Megatron-LM's)")
      ->check(kPositive);
  app.add_option("--seq-length", t.seq_length, "Sequence length (default: the model's seq_length)")
      ->check(kPositive);
  app.add_option("--dtype", t.dtype, "Precision of the transformer layers' linear GEMMs (fp8/fp4: Transformer Engine's recipes, or torchao's rowwise)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp4"}));
  app.add_option("--fp8-recipe", t.fp8_recipe,
                 "Scaling recipe: Transformer Engine's (Megatron-LM's tensorwise is current), or torchao's rowwise "
                 "(default: delayed for fp8, nvfp4 for fp4)")
      ->transform(CLI::Transformer({{"tensorwise", "current"}}))
      ->check(CLI::IsMember({"delayed", "current", "mxfp8", "nvfp4", "rowwise"}));
  app.add_flag("--fp8-param-gather", t.fp8_param_gather,
               "Keep the fp8 linears' weights in fp8 and all-gather them in fp8 (needs --distributed-optimizer)");
  app.add_option("--recompute,--recompute-granularity", t.recompute, "Activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  app.add_option("--recompute-modules", t.recompute_modules,
                 "Modules --recompute selective recomputes, comma-separated (default core_attn); op alone: "
                 "torchtitan's per-op policy")
      ->delimiter(',')
      ->check(CLI::IsMember({"core_attn", "mlp", "layernorm", "moe", "moe_act", "shared_experts", "mla_up_proj", "op"}));
  app.add_option("--recompute-method", t.recompute_method,
                 "--recompute full: uniform (checkpoints of N layers) or block (the first N layers); default uniform")
      ->check(CLI::IsMember({"uniform", "block"}));
  app.add_option("--recompute-num-layers", t.recompute_num_layers, "N of --recompute-method (default 1)");
  app.add_option("--cpu-offloading-num-layers", t.cpu_offloading_num_layers,
                 "Offload the activations the first N decoder layers save for backward to host memory, as "
                 "Megatron-Core's --cpu-offloading (default 0: none)");
  app.add_flag("--distributed-optimizer,--use-distributed-optimizer", t.distributed_optimizer, "Shard optimizer state over data parallel ranks");
  app.add_option_function<std::string>(
         "--data-parallel-sharding-strategy",
         [&t](const std::string& name) { t.data_parallel_sharding = *parse_data_parallel_sharding(name); },
         "What data parallelism shards, as Megatron-FSDP: no_shard, optim (= --distributed-optimizer), optim_grads "
         "(ZeRO-2), optim_grads_params (ZeRO-3, FSDP FULL_SHARD); also zero1, zero2, zero3, shard_grad_op, full_shard")
      ->check(CLI::Validator(
          [](std::string& name) {
            return parse_data_parallel_sharding(name) ? std::string() : "unknown sharding strategy '" + name + "'";
          },
          "STRATEGY"));
  app.add_option_function<std::string>(
         "--fsdp-implementation",
         [&t](const std::string& name) { t.fsdp_implementation = *parse_fsdp_implementation(name); },
         "Whose schedule the sharded strategies follow: megatron (Megatron-FSDP's, also PyTorch FSDP1's; default) "
         "or fsdp2 (torchtitan's: the root unit and the last layer kept whole from forward to backward; with --pp, every unit gathered and reduced once a step)")
      ->check(CLI::IsMember({"megatron", "fsdp2"}));
  app.add_flag("--overlap-grad-reduce", t.overlap_grad_reduce, "Reduce gradients per bucket during the backward pass");
  app.add_flag("--overlap-param-gather", t.overlap_param_gather,
               "All-gather the distributed optimizer's weights during the next forward pass");
  app.add_flag("--grad-reduce-in-bf16", t.grad_reduce_in_bf16,
               "Keep and reduce the main gradients in bf16 instead of fp32 (Megatron-LM's flag)");
  app.add_option_function<std::string>(
         "--optimizer-state-dtype",
         [&t](const std::string& name) { t.optimizer_state_dtype = *parse_enum<OptimizerStateDtype>(name); },
         "Adam's moments and master weights: fp32 (default), or bf16/fp16 with the 16-bit weights as master weights "
         "(NeMo 1's optim.dtype)")
      ->check(CLI::IsMember(names_of<OptimizerStateDtype>()));
  app.add_flag("--store-param-remainders", t.store_param_remainders,
               "Keep the fp32 master weights as the 16 bits the bf16 weights lack (Megatron-LM's flag)");
  app.add_option("--allocator-fragmentation", t.allocator_fragmentation,
                 "Memory PyTorch's caching allocator holds unused, as a share of the tensors at the peak "
                 "(reserved / allocated - 1; default 0), counted against the GPU");
  app.add_option("--ddp-bucket-size", t.ddp_bucket_size,
                 "Parameters per gradient bucket (default max(40000000, 1000000 * dp))")
      ->check(kPositive);
  app.add_flag("--tp-comm-overlap", t.tp_comm_overlap, "Pipeline TP all-gathers/reduce-scatters with their GEMMs (needs --sp)");
  app.add_option("--clip-grad", t.clip_grad, "Gradient-norm clipping threshold; 0 disables (default 1.0)");
  app.add_option("--moe-token-dispatcher-type", t.moe_token_dispatcher_type,
                 "How tokens reach their experts: alltoall (NCCL's; the default, as Megatron's MoE recipes set it), "
                 "allgather (Megatron-LM's argument default), or flex "
                 "(DeepEP's or HybridEP's kernels: each token sent once to each GPU and node of its experts)")
      ->check(CLI::IsMember({"alltoall", "allgather", "flex"}));
  app.add_option("--moe-expert-capacity-factor", t.moe_expert_capacity_factor,
                 "Drop the tokens past this many times an expert's mean load (default, or negative: dropless)");
  app.add_flag("--moe-pad-expert-input-to-capacity", t.moe_pad_expert_input_to_capacity,
               "Pad every expert's tokens to its capacity (needs --moe-expert-capacity-factor)");
  app.add_flag("--moe-router-padding-for-quantization", t.moe_router_padding_for_quantization,
               "Pad the routing map to the fp8/fp4 GEMMs' row multiple instead of the experts' rows (needs --dtype fp8 or fp4)");
  app.add_option("--moe-imbalance", t.moe_imbalance,
                 "The busiest expert's tokens over the mean (default 1: balanced routing; docs/parallelism.md)");
  app.add_flag("--moe-shared-expert-overlap", t.moe_shared_expert_overlap,
               "Run the shared experts while the tokens are dispatched and combined (alltoall dispatcher)");
  app.add_flag("--overlap-moe-expert-parallel-comm", t.overlap_moe_expert_parallel_comm,
               "Combined 1F1B: each forward runs beside another micro-batch's backward, hiding the all-to-alls (host not simulated)");
  app.add_option_function<std::vector<std::string>>(
         "--cuda-graph-scope",
         [&t](const std::vector<std::string>& names) {
           for (const std::string& name : names) t.cuda_graph_scope.push_back(*parse_enum<CudaGraphScope>(name));
         },
         "What runs in CUDA graphs, comma-separated, as Megatron-LM: full_iteration, or attn, mlp, moe, moe_router, "
         "moe_preprocess (Transformer Engine's per-layer graphs); default none")
      ->delimiter(',')
      ->check(CLI::IsMember(names_of<CudaGraphScope>()));
}

}  // namespace syssim::tool
