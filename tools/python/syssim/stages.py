"""The stages one by one, on a graph in the graph format (docs/python.md, "Stages").

Each function runs the library code of its tool (syssim-trace, syssim-shard, syssim-cost,
syssim-sim, syssim-mem, syssim-report) and returns a new Graph; a stage written in Python
reads and writes graphs the same way (Graph.to_dict, Graph.from_dict), so any one of them can
be swapped for a user's own.
"""

import json

from . import _syssim, _config_of, _hardware_of, _json_of, _model_of, _written, ParallelismConfig, TrainingConfig

__all__ = ["Graph", "trace", "shard", "cost", "simulate", "memory", "report"]


class Graph:
    """One training step's graph in the graph format (docs/graph-format.md): the text the tools
    pass on stdout, checked by the library whenever a stage reads it."""

    def __init__(self, text):
        self._text = _of_type(text, (str,), "Graph")

    @classmethod
    def read(cls, path):
        """The graph in a file a tool wrote (syssim-trace -o, ...)."""
        with open(path) as graph:
            return cls(graph.read())

    @classmethod
    def from_dict(cls, fields):
        return cls(json.dumps(fields))

    def to_dict(self):
        """The graph's JSON object; ValueError when the text is not one."""
        try:
            fields = json.loads(self._text)
        except ValueError as error:
            raise ValueError(f"Graph: not valid JSON: {error}") from None
        if not isinstance(fields, dict):
            raise ValueError(f"Graph: expected a JSON object, got {type(fields).__name__}")
        return fields

    def to_json(self, path=None):
        """The graph's text, as the tools write it; also written to path."""
        return _written(self._text, path)

    def sections(self):
        """The sections the graph holds, in the order of the stages."""
        fields = self.to_dict()
        return [name for name in ("model", "trace", "shard", "cost", "sim", "mem") if fields.get(name) is not None]

    def __repr__(self):
        try:
            return f"Graph(sections={self.sections()!r})"
        except ValueError:  # printing never fails: a text that is no graph says so
            return f"Graph(not a graph, {len(self._text)} characters)"


def _of_type(value, kinds, name):
    """`value` when it is one of `kinds`; a one-line ValueError naming the argument otherwise
    (pybind11's TypeError would print every argument: the whole graph)."""
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    return value


def _text_of(graph):
    if not isinstance(graph, Graph):
        raise ValueError(f"graph: expected a syssim.stages.Graph, got {graph!r}")
    return graph._text


def trace(model):
    """syssim-trace: the traced step of a model (a path, preset name, ModelConfig or HFModel)."""
    return Graph(_syssim.trace_stage(json.dumps(_model_of(model).to_dict())))


def shard(graph, parallelism=None, training=None):
    """syssim-shard: the traced graph under a layout and training settings."""
    parallelism = _config_of(parallelism, ParallelismConfig, "parallelism")
    training = _config_of(training, TrainingConfig, "training")
    return Graph(_syssim.shard_stage(_text_of(graph), _json_of(parallelism, "parallelism"),
                                     _json_of(training, "training")))


def cost(graph, hardware, estimator="auto"):
    """syssim-cost: a time for every op on the hardware (auto, roofline or calibrated)."""
    hardware = _hardware_of(hardware)
    return Graph(_syssim.cost_stage(_text_of(graph), json.dumps(hardware.to_dict()), hardware._folder,
                                    _of_type(estimator, (str,), "estimator")))


def simulate(graph, timeline=False, every_microbatch=False):
    """syssim-sim: the discrete-event simulation of the costed step."""
    return Graph(_syssim.simulate_stage(_text_of(graph), _of_type(timeline, (bool,), "timeline"),
                                        _of_type(every_microbatch, (bool,), "every_microbatch")))


def memory(graph):
    """syssim-mem: the per-GPU memory of the sharded step."""
    return Graph(_syssim.memory_stage(_text_of(graph)))


def report(graph, format="json", mfu_convention="megatron", train_tokens=None):
    """syssim-report: the report's text (format json, text, chrome-trace, svg or critical-path)."""
    return _syssim.report_stage(_text_of(graph), _of_type(format, (str,), "format"),
                                _of_type(mfu_convention, (str,), "mfu_convention"),
                                _of_type(train_tokens, (int, float, type(None)), "train_tokens"))
