"""The stages one at a time from Python, with a stage of your own between two of syssim's
(docs/python.md, "Stages"). Run: PYTHONPATH=build/python python3 examples/python_stages.py"""

import json

import syssim
from syssim import stages

# %% The pipe of tools, in Python: every stage takes and returns a Graph.
graph = stages.trace("llama3-8b")
graph = stages.shard(graph, syssim.ParallelismConfig(tp=2, sp=True, dp=4),
                     syssim.TrainingConfig(micro_batch=1, global_batch=128, use_distributed_optimizer=True))
costed = stages.cost(graph, "h100-sxm-80gb")
print(stages.report(stages.memory(stages.simulate(costed)), "text"))

# %% Your own cost stage: the attention kernels 20% slower than syssim prices them.
fields = costed.to_dict()
kinds = {op["id"]: op["kind"] for op in fields["shard"]["ops"]}
for op in fields["cost"]["ops"]:
    if kinds[op["id"]].startswith("attention"):
        op["time_us"] *= 1.2
mine = json.loads(stages.report(stages.memory(stages.simulate(stages.Graph.from_dict(fields)))))
print("step_time_ms with slower attention:", mine["step_time_ms"])
