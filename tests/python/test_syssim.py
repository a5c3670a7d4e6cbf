"""The Python module (docs/python.md), against the command-line tools and published figures.

Run by CTest with the built package first on PYTHONPATH and SYSSIM_BINARY_DIR set."""

import json
import os
import runpy
import subprocess
import threading
import time

import pytest

import syssim

BINARY_DIR = os.environ["SYSSIM_BINARY_DIR"]
SOURCE_DIR = os.environ["SYSSIM_SOURCE_DIR"]


def cli(*args):
    return subprocess.run([os.path.join(BINARY_DIR, "bin", "syssim"), *args], check=True, capture_output=True,
                          text=True).stdout


# Plumbing: the module runs the library code the tools run, so the JSON is the same bytes.
JOBS = [
    ("llama3-8b", "h100-sxm-80gb", dict(tp=2, sp=True, dp=4), dict(micro_batch=1, global_batch=128,
                                                                     use_distributed_optimizer=True)),
    ("llama3-70b", "h200-sxm", dict(tp=8, pp=2, vpp=2, dp=2), dict(micro_batch=1, global_batch=32, recompute="full")),
    ("qwen3-30b-a3b", "b200", dict(dp=8, ep=8), dict(micro_batch=2, global_batch=64, dtype="fp8")),
    # Keys the training section holds only when set.
    ("llama3-8b", "h100-sxm-80gb", dict(dp=8), dict(micro_batch=1, global_batch=64,
                                                    data_parallel_sharding_strategy="optim_grads",
                                                    cuda_graph_scope=["attn", "mlp"])),
    # The pipeline's layout and schedule, which are syssim run's flags, not graph-format keys.
    ("llama3-8b", "h100-sxm-80gb", dict(pp=3, dp=2, pp_layout=[11, 11, 10], pipeline_schedule="gpipe"),
     dict(micro_batch=1, global_batch=12)),
]


def cli_flags(parallelism, training):
    flags = []
    for key, value in {**parallelism, **training}.items():
        if value is True:
            flags.append("--distributed-optimizer" if key == "use_distributed_optimizer" else "--" + key)
        elif isinstance(value, list):
            flags += ["--" + key.replace("_", "-"), ",".join(map(str, value))]
        else:
            flags += ["--" + key.replace("_", "-"), str(value)]
    return flags


@pytest.mark.parametrize("model,hardware,parallelism,training", JOBS)
def test_simulate_gives_the_json_of_syssim_run(model, hardware, parallelism, training):
    report = syssim.simulate(model=model, hardware=hardware, parallelism=syssim.ParallelismConfig(**parallelism),
                             training=syssim.TrainingConfig(**training))
    expected = cli("run", model, "--hardware", hardware, *cli_flags(parallelism, training), "--format", "json")
    assert report.to_json() == expected
    assert str(report) == cli("run", model, "--hardware", hardware, *cli_flags(parallelism, training))


def test_estimate_memory_gives_the_json_of_syssim_memory():
    model, hardware, parallelism, training = JOBS[1]
    report = syssim.estimate_memory(model=model, hardware=hardware,
                                    parallelism=syssim.ParallelismConfig(**parallelism),
                                    training=syssim.TrainingConfig(**training))
    assert report.to_json() == cli("memory", model, "--hardware", hardware, *cli_flags(parallelism, training),
                                   "--format", "json")


def test_sweep_gives_the_rows_of_syssim_sweep():
    result = syssim.sweep(model="llama3-8b", hardware="h100-sxm-80gb", parallelism=syssim.ParallelismConfig(dp=8),
                          training=syssim.TrainingConfig(global_batch=64),
                          over={"parallelism.tp": [1, 2, 4], "training.recompute": ["none", "full"]})
    rows = json.loads(cli("sweep", "llama3-8b", "--hardware", "h100-sxm-80gb", "--dp", "8", "--global-batch", "64",
                          "--over", "parallelism.tp=1,2,4", "--over", "training.recompute=none,full", "--format",
                          "json"))["points"]
    assert [(r.inputs, r.status, r.metrics["step_time_ms"], list(r.step_time_band_ms)) for r in result] == \
           [(r["inputs"], r["status"], r["step_time_ms"], r["step_time_band_ms"]) for r in rows]
    best = result.best("step_time_ms")
    assert best.metrics["step_time_ms"] == min(r["step_time_ms"] for r in rows if r["status"] == "ok")
    # The row's report is its job simulated again: the same step.
    assert best.report.step_time_ms == best.metrics["step_time_ms"]
    frame = result.to_dataframe()
    assert list(frame["parallelism.tp"]) == [1, 1, 2, 2, 4, 4]


def tool(name, *args, stdin=None):
    return subprocess.run([os.path.join(BINARY_DIR, "bin", name), *args], check=True, capture_output=True, text=True,
                          input=stdin).stdout


def without_provenance(graph_text):
    graph = json.loads(graph_text)
    del graph["provenance"]
    return graph


# Plumbing: each stage is its tool's library call, so the graphs and reports of the pipe of
# tools come out of the Python stages too (the provenance names the caller).
@pytest.mark.parametrize("model,hardware,parallelism,training", JOBS[::2])
def test_the_stages_give_the_graphs_and_report_of_the_pipe(model, hardware, parallelism, training):
    from syssim import stages
    flags = cli_flags(parallelism, training)
    graph = stages.trace(model)
    piped = tool("syssim-trace", model)
    assert without_provenance(graph.to_json()) == without_provenance(piped)
    for stage, name, args in [
            (lambda g: stages.shard(g, syssim.ParallelismConfig(**parallelism), syssim.TrainingConfig(**training)),
             "syssim-shard", flags),
            (lambda g: stages.cost(g, hardware), "syssim-cost", ["--hardware", hardware]),
            (stages.simulate, "syssim-sim", []),
            (stages.memory, "syssim-mem", [])]:
        graph, piped = stage(graph), tool(name, *args, stdin=piped)
        assert without_provenance(graph.to_json()) == without_provenance(piped), name
    assert graph.to_dict()["provenance"][-1]["tool"] == "syssim.stages.memory"
    assert stages.report(graph) == tool("syssim-report", "--format", "json", stdin=piped)
    assert stages.report(graph, "text", mfu_convention="causal", train_tokens=1e12) == tool(
        "syssim-report", "--mfu-convention", "causal", "--train-tokens", "1e12", stdin=piped)


def test_a_stage_swapped_for_python_code():
    """A user's own stage between two of syssim's: every op of the cost section and its issue on
    the host 10% slower makes the step 10% slower where nothing else changes (one GPU: no
    communication)."""
    from syssim import stages
    graph = stages.cost(stages.shard(stages.trace("llama3-8b")), "h100-sxm-80gb")
    fields = graph.to_dict()
    for op in fields["cost"]["ops"]:
        op["time_us"] *= 1.1
        if "host_us" in op:
            op["host_us"] *= 1.1
    slower = json.loads(stages.report(stages.memory(stages.simulate(stages.Graph.from_dict(fields)))))
    base = json.loads(stages.report(stages.memory(stages.simulate(graph))))
    assert slower["step_time_ms"] == pytest.approx(1.1 * base["step_time_ms"], rel=1e-9)


def test_a_stage_refuses_a_graph_without_the_section_it_needs():
    from syssim import stages
    with pytest.raises(ValueError, match="run syssim-shard first"):
        stages.simulate(stages.trace("llama3-8b"))
    with pytest.raises(ValueError, match="mfu_convention"):
        stages.report(stages.Graph("{}"), mfu_convention="palm")


def test_world_size_is_the_product_of_the_sizes():
    assert syssim.ParallelismConfig(tp=2, dp=4, cp=2, pp=3).world_size == 48


def test_configs_read_their_defaults_and_take_assignments():
    assert (syssim.ParallelismConfig(tp=2).dp, syssim.ParallelismConfig(tp=2).sp) == (1, False)
    assert syssim.ParallelismConfig(tp=2) == syssim.ParallelismConfig(tp=2, dp=1)
    assert syssim.TrainingConfig(use_distributed_optimizer=True).use_distributed_optimizer
    # An assigned size is the one simulated (it was shadowed, and the old one simulated).
    parallelism = syssim.ParallelismConfig(tp=2)
    parallelism.tp, parallelism.dp = 4, 2
    job = dict(model="llama3-8b", hardware="h100-sxm-80gb", training=dict(global_batch=8))
    report = syssim.simulate(parallelism=parallelism, **job)
    assert (report.parallelism["tp"], report.parallelism["dp"], parallelism.world_size) == (4, 2, 8)
    assert report.to_json() == syssim.simulate(parallelism=dict(tp=4, dp=2), **job).to_json()
    with pytest.raises(ValueError, match=r"^parallelism: expected a ParallelismConfig or a dict of its keys"):
        syssim.simulate(parallelism=[4], **job)
    with pytest.raises(ValueError, match=r"^over\['parallelism.tp'\]: expected a list of values"):
        syssim.sweep(over={"parallelism.tp": "12"}, **job)
    # An empty name read standard input, then said "expected a mapping at the top level".
    with pytest.raises(ValueError, match=r"^expected a model preset or file, got ''$"):
        syssim.simulate(**{**job, "model": ""})
    with pytest.raises(ValueError, match=r"^expected a hardware preset or file, got ''$"):
        syssim.simulate(**{**job, "hardware": ""})


def test_configs_from_the_presets_hold_the_published_figures():
    # Llama 3 8B (arXiv:2407.21783, Table 3): 32 layers, width 4096, 32 heads, 8 KV heads, FFN 14336.
    model = syssim.load_model_yaml("llama3-8b")
    assert (model.num_layers, model.hidden_size, model.num_attention_heads, model.num_query_groups,
            model.ffn_hidden_size) == (32, 4096, 32, 8, 14336)
    # H100 SXM datasheet: 989 dense BF16 TFLOP/s, 3.35 TB/s.
    hardware = syssim.load_hardware_yaml("h100-sxm-80gb")
    assert (hardware.peak_tflops_mm, hardware.peak_memory_bandwidth_GBps) == (989, 3350)
    # A ModelConfig made from the same fields is the same model, and simulates the same step.
    same = syssim.ModelConfig(**model.to_dict())
    assert same == model
    job = dict(hardware=hardware, training=syssim.TrainingConfig(global_batch=8))
    assert syssim.simulate(model=same, **job).to_json() == syssim.simulate(model="llama3-8b", **job).to_json()


def test_a_trace_simulated_on_hardware_is_simulate():
    job = dict(model="llama3-8b", parallelism=dict(tp=2, sp=True, dp=2, pp=2), training=dict(global_batch=8))
    traced = syssim.trace(**job)
    for hardware in ("h100-sxm-80gb", "b200"):
        assert traced.simulate_on(hardware).to_json() == syssim.simulate(hardware=hardware, **job).to_json()
    # A memory estimate reads the runtime fields it did not simulate as zero (the spec's).
    memory = syssim.estimate_memory(hardware="h100-sxm-80gb", **job)
    assert (memory.step_time_ms, memory.mfu, memory.by_op_type_ms) == (0.0, 0.0, {})
    assert memory.peak_memory_gb > 0


def test_a_model_config_takes_the_keys_of_a_model_yaml():
    # The YAML's defaults (name, num_query_groups = heads) and its refusal of an unknown key.
    model = syssim.ModelConfig(num_layers=2, hidden_size=512, num_attention_heads=8, ffn_hidden_size=1024,
                               seq_length=1024, vocab_size=32000)
    assert (model.name, model.num_query_groups) == ("ModelConfig", 8)
    with pytest.raises(ValueError, match=r"^ModelConfig: unknown key 'num_layer' \(did you mean 'num_layers'\?\)"):
        syssim.ModelConfig(num_layer=2, hidden_size=512, num_attention_heads=8, ffn_hidden_size=1024,
                           seq_length=1024, vocab_size=32000)
    assert syssim.ModelConfig(huggingface="Qwen/Qwen3-8B", overrides={"seq_length": 4096}).num_layers == 36


def test_a_hugging_face_config_by_id():
    # meta-llama/Llama-3.1-8B's config.json (shipped): 32 layers, 8 KV heads, vocabulary 128256.
    model = syssim.HFModel("meta-llama/Llama-3.1-8B", overrides={"seq_length": 8192}).resolve()
    assert (model.num_layers, model.num_query_groups, model.vocab_size, model.seq_length) == (32, 8, 128256, 8192)


def test_errors_raise_value_error_with_the_tools_message():
    with pytest.raises(ValueError, match=r"^no-such-model: no such file, and no model preset .*/models/no-such-model\.yaml"):
        syssim.simulate(model="no-such-model", hardware="h100-sxm-80gb")
    with pytest.raises(ValueError, match=r"^training: unknown key 'micro_batchh'"):
        syssim.simulate(model="llama3-8b", hardware="h100-sxm-80gb", training=syssim.TrainingConfig(micro_batchh=2))
    with pytest.raises(ValueError, match=r"^parallelism/tp: expected a size from 1 to"):
        syssim.simulate(model="llama3-8b", hardware="h100-sxm-80gb", parallelism=syssim.ParallelismConfig(tp=0))
    with pytest.raises(ValueError, match="select one precision"):
        syssim.TrainingConfig(dtype="bf16", fp8=True)
    with pytest.raises(NotImplementedError):
        syssim.CustomModel()


def test_the_report_as_dict_and_dataframe():
    report = syssim.simulate(model="llama3-8b", hardware="h100-sxm-80gb", training=syssim.TrainingConfig(global_batch=4))
    assert report.to_dict() == json.loads(report.to_json())
    frame = report.to_dataframe()
    assert len(frame) == 1 and frame["step_time_ms"][0] == report.step_time_ms


def test_simulate_releases_the_interpreter():
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    counter = threading.Thread(target=count, daemon=True)
    counter.start()
    try:
        # A model no other test traces: its trace takes a second or more, all of it outside
        # the interpreter's lock.
        syssim.simulate(model="mixtral-8x7b", hardware="h100-sxm-80gb",
                        parallelism=syssim.ParallelismConfig(tp=8, sp=True), training=syssim.TrainingConfig(global_batch=8))
    finally:
        done.set()
        counter.join()
    assert len(ticks) > 5


@pytest.mark.parametrize("example", ["python_quickstart.py", "python_stages.py"])
def test_the_example_runs_top_to_bottom(example, capsys):
    runpy.run_path(os.path.join(SOURCE_DIR, "examples", example), run_name="__main__")
    assert "step_time_ms" in capsys.readouterr().out


def test_an_assigned_model_or_hardware_key_is_read_as_the_yaml_would_read_it():
    # A default that follows another key follows an assignment: kv_channels = hidden_size /
    # num_attention_heads (Megatron-Core's TransformerConfig), 2048 / 16 = 128.
    fields = dict(num_layers=2, hidden_size=1024, num_attention_heads=16, ffn_hidden_size=4096, seq_length=1024,
                  vocab_size=32000)
    model = syssim.ModelConfig(**fields)
    model.hidden_size = 2048
    assert (model.kv_channels, model.num_query_groups) == (128, 16)
    with pytest.raises(ValueError, match=r"^ModelConfig: unknown key 'num_layer' \(did you mean 'num_layers'\?\)"):
        model.num_layer = 8
    assert model.num_layers == 2  # the refused assignment left the model as it was
    hardware = syssim.load_hardware_yaml("h100-sxm-80gb")
    with pytest.raises(ValueError, match=r"unknown key 'gpu_memory_gb' \(did you mean 'gpu_memory_GB'\?\)"):
        hardware.gpu_memory_gb = 20
    # extends: the preset's keys, these replacing them; Llama-3-8B at tp 8 needs 32 GB of 10.
    small = syssim.HardwareConfig(extends="h100-sxm-80gb", gpu_memory_GB=10)
    report = syssim.simulate(model="llama3-8b", hardware=small, parallelism=dict(tp=8), training=dict(global_batch=8))
    assert report.bottlenecks["oom"]["capacity_gb"] == 10
    with pytest.raises(ValueError, match=r"^ModelConfig: missing required key 'num_layers'"):
        syssim.ModelConfig()


def test_a_sweep_row_reports_the_job_as_swept():
    model, hardware = syssim.load_model_yaml("llama3-8b"), syssim.load_hardware_yaml("h100-sxm-80gb")
    rows = syssim.sweep(model=model, hardware=hardware, parallelism=dict(dp=8), training=dict(global_batch=64),
                        over={"parallelism.tp": [2]}, use_cache=False)
    model.num_layers, hardware.gpu_memory_GB = 16, 200
    row = next(iter(rows))
    assert row.report.step_time_ms == row.metrics["step_time_ms"]
    # A string is one value, whatever it holds; "null" stays a string.
    rows = syssim.sweep(model="llama3-8b", hardware="h100-sxm-80gb", parallelism=dict(dp=8),
                        training=dict(global_batch=64), over={"training.recompute": ["full,selective", "null"]})
    assert [row.inputs["training.recompute"] for row in rows] == ["full,selective", "null"]
    assert [row.status for row in rows] == ["invalid", "invalid"]
    # A value the sweep rewrites (a strategy's alias; a list key's one name) is the job the sweep
    # simulated: zero3 is optim_grads_params (docs/syssim-sweep.md).
    job = dict(model="llama3-8b", hardware="h100-sxm-80gb", parallelism=dict(dp=8))
    rows = syssim.sweep(**job, training=dict(global_batch=64, recompute="selective"),
                        over={"training.data_parallel_sharding_strategy": ["zero3"],
                              "training.recompute_modules": ["mlp"]})
    named = syssim.simulate(**job, training=dict(global_batch=64, recompute="selective", recompute_modules=["mlp"],
                                                 data_parallel_sharding_strategy="optim_grads_params"))
    assert next(iter(rows)).report.to_json() == named.to_json()


def test_config_objects_take_back_what_reports_and_traces_give():
    report = syssim.simulate(model="llama3-8b", hardware="h100-sxm-80gb", parallelism=dict(tp=2))
    assert syssim.ParallelismConfig(**report.parallelism).world_size == 2  # world_size is given back too
    with pytest.raises(ValueError, match=r"world_size=4 is not tp\*dp\*cp\*pp=2"):
        syssim.ParallelismConfig(tp=2, world_size=4)
    with pytest.raises(AttributeError):
        syssim.ParallelismConfig(tp=2).world_size = 16
    training = syssim.TrainingConfig()
    assert (training.micro_batch, training.global_batch, training.dtype, training.recompute) == (1, 1, "bf16", "none")
    training.use_distributed_optimizer = True
    assert training.to_dict() == {"distributed_optimizer": True}
    # A strategy sharding the optimizer state implies it (docs/graph-format.md); the two names
    # of one key may not disagree; a size written 2.0 is 2, as the library reads it.
    assert syssim.TrainingConfig(data_parallel_sharding_strategy="optim_grads").use_distributed_optimizer
    with pytest.raises(ValueError, match=r"distributed_optimizer and use_distributed_optimizer .* disagree"):
        syssim.TrainingConfig(distributed_optimizer=True, use_distributed_optimizer=False)
    assert syssim.ParallelismConfig(tp=2.0, dp=4).world_size == 8
    with pytest.raises(ValueError, match=r"^load_model_yaml: expected a path or a preset name, got 3$"):
        syssim.load_model_yaml(3)
    traced = syssim.trace(model="llama3-8b", parallelism=dict(tp=2, sp=True), training=dict(global_batch=4))
    assert (traced.model.name, traced.parallelism.tp, traced.training.global_batch) == ("llama3-8b", 2, 4)
    # The pipeline's layout and schedule and the CP exchange come back as given.
    parallelism = syssim.ParallelismConfig(tp=2, sp=True, cp=2, pp=2, pp_layout=[14, 18], pipeline_schedule="gpipe",
                                           cp_comm_type="all_gather")
    assert syssim.trace(model="llama3-8b", parallelism=parallelism, training=dict(global_batch=4)).parallelism == \
        parallelism
    # Printing a graph never fails; a text that is no graph is refused in one line.
    assert repr(syssim.stages.Graph("null")) == "Graph(not a graph, 4 characters)"
    with pytest.raises(ValueError, match=r"^Graph: not valid JSON"):
        syssim.stages.Graph("garbage").sections()
    # JSON has no inf: the key is named.
    with pytest.raises(ValueError, match=r"^training: key 'clip_grad' must be finite, got inf$"):
        syssim.simulate(model="llama3-8b", hardware="h100-sxm-80gb", training=dict(clip_grad=float("inf")))


def test_a_config_json_path_is_taken_from_the_working_folder(tmp_path, monkeypatch):
    folder = tmp_path / "mine" / "qwen"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(open(os.path.join(SOURCE_DIR, "configs/hf/Qwen/Qwen3-8B/config.json")).read())
    monkeypatch.chdir(tmp_path)
    # Qwen3-8B's config.json: 36 layers.
    model = syssim.HFModel("mine/qwen/config.json", {"seq_length": 4096}).resolve()
    assert model.num_layers == 36
    # Named as syssim run names it: a config.json after its folder, an id after its model,
    # whole (a dot is no extension).
    assert model.name == "qwen"
    assert syssim.HFModel("meta-llama/Llama-3.1-8B", {"seq_length": 4096}).resolve().name == "Llama-3.1-8B"


def test_keys_not_given_read_as_their_defaults_and_flags_take_booleans():
    training = syssim.TrainingConfig()
    # Keys written only when set read as their unset value.
    assert (training.data_parallel_sharding_strategy, training.optimizer_state_dtype, training.grad_reduce_in_bf16) == \
        (None, "fp32", False)
    parallelism = syssim.ParallelismConfig()
    assert (parallelism.pp_layout, parallelism.pipeline_schedule, parallelism.cp_comm_type) == (None, None, "p2p")
    with pytest.raises(ValueError, match=r"^TrainingConfig: use_distributed_optimizer='no': expected True or False$"):
        syssim.TrainingConfig(use_distributed_optimizer="no")
    with pytest.raises(ValueError, match=r"^TrainingConfig: fp16='no': expected True or False$"):
        syssim.TrainingConfig(fp16="no")
    with pytest.raises(ValueError, match=r"^ParallelismConfig: dp='2' is not a whole number$"):
        syssim.ParallelismConfig(tp=2, dp="2").world_size
    with pytest.raises(ValueError, match=r"^dtype=: expected bf16, fp16, fp8 or fp4$"):
        syssim.simulate(model="llama3-8b", hardware="h100-sxm-80gb", training=syssim.TrainingConfig(dtype=""))


def test_extends_here_is_a_yaml_s_extends_and_a_report_s_hardware_reads_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hwx.yaml").write_text("extends: h100-sxm-80gb\nname: hwx\ngpu_memory_GB: 100\n")
    here = syssim.simulate(model="llama3-8b", hardware=syssim.HardwareConfig(extends="h100-sxm-80gb", gpu_memory_GB=100,
                                                                               name="hwx"), parallelism={"tp": 2})
    tool = subprocess.run([os.path.join(BINARY_DIR, "bin", "syssim"), "run", "llama3-8b", "--hardware", "hwx.yaml",
                           "--tp", "2", "--format", "json"], capture_output=True, text=True, check=True).stdout
    assert here.to_json() == tool
    again = syssim.simulate(model="llama3-8b", hardware=syssim.HardwareConfig(**here.hardware), parallelism={"tp": 2})
    assert again.step_time_ms == here.step_time_ms


def test_a_memory_estimate_reads_its_runtime_fields_as_zero_in_its_dict_too():
    estimate = syssim.estimate_memory(model="llama3-8b", hardware="h100-sxm-80gb")
    fields = estimate.to_dict()
    assert (fields["step_time_ms"], fields["mfu"], estimate.mfu) == (0.0, 0.0, 0.0)
    assert fields["peak_memory_gb"] == estimate.peak_memory_gb > 0
    assert "mfu" not in json.loads(estimate.to_json())  # the text syssim memory prints


def test_a_hardware_estimator_of_roofline_prices_without_its_bundle():
    report = syssim.simulate(model="llama3-8b", hardware=syssim.HardwareConfig(extends="h100-sxm-80gb", estimator="roofline"))
    assert report.estimator == "the roofline over the hardware's efficiencies"


def test_an_id_is_looked_up_as_the_command_line_looks_it_up(tmp_path, monkeypatch):
    # The id's own folder from the working folder, the hub's cache, the shipped configs: the id
    # once each, named after the model as `syssim run ORG/NAME` names it.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"^bar: huggingface: foo/bar: no config.json found \(looked in: foo/bar, "):
        syssim.HFModel("foo/bar", {"seq_length": 1024}).resolve()
    (tmp_path / "foo" / "foo" / "bar").mkdir(parents=True)
    (tmp_path / "foo" / "foo" / "bar" / "config.json").write_text("{}")  # not the id's folder
    with pytest.raises(ValueError, match=r"no config.json found"):
        syssim.HFModel("foo/bar", {"seq_length": 1024}).resolve()


def test_stage_arguments_of_the_wrong_type_are_one_line():
    graph = syssim.stages.trace("llama3-8b")
    with pytest.raises(ValueError, match=r"^timeline: expected bool, got 'yes'$"):
        syssim.stages.simulate(graph, timeline="yes")
    with pytest.raises(ValueError, match=r"^train_tokens: expected int or float or None, got '1e12'$"):
        syssim.stages.report(graph, "text", train_tokens="1e12")
