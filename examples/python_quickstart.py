# syssim from Python, cell by cell as in a notebook (docs/python.md). Run it with the package
# on the path: PYTHONPATH=build/python python3 examples/python_quickstart.py
import syssim

# %% One job: Llama-3-8B on one 8-GPU H100 node, presets by name.
report = syssim.simulate(
    model="llama3-8b",
    hardware="h100-sxm-80gb",
    parallelism=syssim.ParallelismConfig(tp=2, sp=True, dp=4),
    training=syssim.TrainingConfig(micro_batch=1, global_batch=128, use_distributed_optimizer=True),
)
print(report)
print("step_time_ms", report.step_time_ms, "mfu", report.mfu)

# %% Memory only, for a layout that may not fit.
memory = syssim.estimate_memory(model="llama3-70b", hardware="h100-sxm-80gb",
                                parallelism=syssim.ParallelismConfig(tp=8, pp=2, dp=4),
                                training=syssim.TrainingConfig(global_batch=64, recompute="full"))
print("peak_memory_gb", memory.peak_memory_gb)

# %% A sweep over tensor parallelism and micro-batch, the best layout, and a table.
result = syssim.sweep(model="llama3-8b", hardware="h100-sxm-80gb",
                      parallelism=syssim.ParallelismConfig(sp=True, dp=4),
                      training=syssim.TrainingConfig(global_batch=128, use_distributed_optimizer=True),
                      over={"parallelism.tp": [1, 2], "training.micro_batch": [1, 2]})
best = result.best("mfu")
print("best", best.inputs if best else None, best.metrics if best else "no layout fits")
try:  # the table needs pandas (Debian's python3-pandas); the rows are there without it
    print(result.to_dataframe().to_string())
except ModuleNotFoundError:
    for row in result:
        print(row.inputs, row.status, row.metrics)

# %% A model from its Hugging Face config.json (shipped, or in the local Hugging Face cache).
qwen = syssim.HFModel("Qwen/Qwen3-8B", overrides={"seq_length": 4096})
print(syssim.simulate(model=qwen, hardware="h100-sxm-80gb", parallelism=syssim.ParallelismConfig(tp=2, dp=4),
                      training=syssim.TrainingConfig(global_batch=64)).to_dict()["step_time_ms"])
