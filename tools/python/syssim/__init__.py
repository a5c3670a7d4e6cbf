"""syssim: predict step time, MFU and memory of LLM training (docs/python.md).

The objects here are plain data; every number comes from syssim's C++ library (the native
module ``syssim._syssim``), the code the command-line tools run.
"""

import json
import math
import os

from . import _location
from . import _syssim

_syssim.set_install_prefix(os.path.normpath(os.path.join(os.path.dirname(__file__), _location.PREFIX_FROM_PACKAGE)))

__all__ = [
    "simulate", "estimate_memory", "sweep", "trace", "Trace", "load_model_yaml", "load_hardware_yaml", "ModelConfig",
    "ParallelismConfig", "TrainingConfig", "HardwareConfig", "HFModel", "CustomModel", "SimulationReport",
    "Sweep", "SweepRow", "data_dir",
]


def _written(text, path):
    """`text`, also written to `path` when one is given."""
    if path is not None:
        with open(path, "w") as out:
            out.write(text)
    return text


def data_dir():
    """The data folder the presets are read from (docs/configs.md)."""
    return _syssim.data_dir()


class _Fields:
    """Keyword fields kept as the graph format's JSON object, readable as attributes (a field not
    given reads as its default, where the class has one) and writable: an assigned field is
    what the next simulation takes, checked by the library then (a model's or a hardware's at
    once). A property (world_size) is not a field: assigning one without a setter raises."""

    _defaults = {}

    def __init__(self, fields):
        object.__setattr__(self, "_fields", dict(fields))

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._defaults) | set(self.__dict__.get("_fields", {})))

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields", {})  # not self._fields: that would call this again
        if name in fields:
            return fields[name]
        if name in self._defaults:
            return self._defaults[name]
        raise AttributeError(f"{type(self).__name__} has no field '{name}'")

    def __setattr__(self, name, value):
        if name.startswith("_") or isinstance(getattr(type(self), name, None), property):
            object.__setattr__(self, name, value)
        else:
            self._assign(name, value)

    def _assign(self, name, value):
        self._fields[name] = value

    def to_dict(self):
        return dict(self._fields)

    def __eq__(self, other):
        return type(self) is type(other) and {**self._defaults, **self._fields} == {**other._defaults, **other._fields}

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"{type(self).__name__}({fields})"


class _Checked(_Fields):
    """Fields the library reads as a YAML file's keys, at once: `_given` holds the keys as given
    (a loaded file's: all of them, resolved), and an assignment reads them again with the new
    key, so that an unknown key is refused by name and a default that follows another key (a
    model's kv_channels, hidden_size / num_attention_heads) follows it."""

    def __init__(self, **fields):
        super().__init__({})
        self._read(dict(fields))

    def _read(self, given):
        text = self._parse(json.dumps(given), str(given.get("name") or type(self).__name__))
        object.__setattr__(self, "_fields", json.loads(text))
        object.__setattr__(self, "_given", given)

    def _assign(self, name, value):
        self._read({**self._given, name: value})

    @classmethod
    def _checked(cls, text):
        """The fields the library read (a loaded file's: all given)."""
        config = cls.__new__(cls)
        fields = json.loads(text)
        object.__setattr__(config, "_fields", fields)
        object.__setattr__(config, "_given", dict(fields))
        return config


class ModelConfig(_Checked):
    """A model: the keys of a model YAML (docs/configs.md), read as the library reads the YAML
    (its defaults, an unknown key refused by name; `huggingface` and `overrides` too)."""

    _parse = staticmethod(_syssim.parse_model)

    @classmethod
    def from_dict(cls, fields):
        return cls(**fields)


class HardwareConfig(_Checked):
    """A GPU and its cluster: the keys of a hardware YAML (docs/configs.md), `extends` too (a
    preset or YAML file whose keys these replace). A relative calibrated_model is taken from the
    YAML's folder (for one made here, the working folder; the base's for the base's own)."""

    _parse = staticmethod(_syssim.parse_hardware)

    def __init__(self, **fields):
        if "extends" in fields:
            base = load_hardware_yaml(fields.pop("extends"))
            inherited = {k: v for k, v in base._fields.items() if k != "name"}
            # The base's bundle by its absolute path, as a YAML's `extends` resolves it.
            if inherited.get("calibrated_model"):
                inherited["calibrated_model"] = os.path.normpath(os.path.join(base._folder, inherited["calibrated_model"]))
            fields = {**inherited, **fields}
        super().__init__(**fields)
        object.__setattr__(self, "_folder", os.getcwd())

    @classmethod
    def _checked(cls, text, folder):
        hardware = super()._checked(text)
        object.__setattr__(hardware, "_folder", folder)
        return hardware


class HFModel:
    """A Hugging Face model by id or config.json path; overrides must give seq_length."""

    def __init__(self, huggingface, overrides=None):
        self.huggingface = huggingface
        self.overrides = dict(overrides or {})

    def resolve(self):
        # A path is taken from the working folder, as the tools take it (the library takes a
        # relative one from the folder of the file that names it).
        given = _path_of(self.huggingface, "HFModel", "a Hugging Face id or a config.json path")
        local = os.path.exists(given)
        path = os.path.normpath(os.path.abspath(given)) if local else given
        # Named as `syssim run` names it: an id and a folder after the model's folder, a
        # config.json after the folder holding it. Errors name the config.json read, or the id.
        name = os.path.basename(os.path.dirname(path) if os.path.isfile(path) else path.rstrip("/"))
        where = (path if os.path.isfile(path) else os.path.join(path, "config.json")) if local else name
        text = json.dumps({"name": name, "huggingface": path, "overrides": self.overrides})  # JSON is YAML
        return ModelConfig._checked(_syssim.parse_model(text, where))

    def __repr__(self):
        return f"HFModel({self.huggingface!r}, overrides={self.overrides!r})"


class CustomModel:
    """Reserved for a model given as a PyTorch module: not supported."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("CustomModel: a model given as a PyTorch module is not supported; "
                                  "give a ModelConfig, an HFModel or a model YAML")


def _path_of(path, name, expected="a path or a preset name"):
    """`path` as text; a one-line ValueError naming the argument for what is no path."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name}: expected {expected}, got {path!r}")
    return os.fspath(path)


def load_model_yaml(path):
    """A model YAML file, or a preset by name; ValueError naming the file, key and value."""
    return ModelConfig._checked(_syssim.load_model(_path_of(path, "load_model_yaml")))


def load_hardware_yaml(path):
    """A hardware YAML file, or a preset by name."""
    return HardwareConfig._checked(*_syssim.load_hardware(_path_of(path, "load_hardware_yaml")))


class ParallelismConfig(_Fields):
    """Parallel sizes, with the graph format's `parallelism` keys (tp, dp, sp, cp, pp, vpp, ep,
    etp, order); the defaults are 1, no sequence parallelism, no virtual stages. Also the
    pipeline's layout as syssim run's flags give it (pipeline_schedule, pp_layout,
    decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers,
    account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split) and
    cp_comm_type."""

    # The pipeline's layout and cp_comm_type as syssim run takes them when not given.
    _defaults = {**{k: v for k, v in json.loads(_syssim.parallelism_defaults()).items() if k != "world_size"},
                 "pipeline_schedule": None, "pp_layout": None, "decoder_first_pipeline_num_layers": None,
                 "decoder_last_pipeline_num_layers": None, "account_for_embedding_in_pipeline_split": False,
                 "account_for_loss_in_pipeline_split": False, "cp_comm_type": "p2p"}

    def __init__(self, *, tp=None, dp=None, sp=None, cp=None, pp=None, vpp=None, **more):
        given = {"tp": tp, "dp": dp, "sp": sp, "cp": cp, "pp": pp, "vpp": vpp}
        # A report's or a graph's parallelism, passed back, carries world_size: it must agree.
        world_size = more.pop("world_size", None)
        super().__init__({**{k: v for k, v in given.items() if v is not None}, **more})
        if world_size is not None and world_size != self.world_size:
            raise ValueError(f"ParallelismConfig: world_size={world_size!r} is not tp*dp*cp*pp={self.world_size}")

    @property
    def world_size(self):
        """tp x dp x cp x pp (read-only)."""
        sizes = []
        for name in ("tp", "dp", "cp", "pp"):
            size = getattr(self, name)
            if isinstance(size, float) and size.is_integer():  # 2.0 is 2, as the library reads it
                size = int(size)
            if isinstance(size, bool) or not isinstance(size, int):
                raise ValueError(f"ParallelismConfig: {name}={size!r} is not a whole number")
            sizes.append(size)
        return math.prod(sizes)


class TrainingConfig(_Fields):
    """Training settings, with the graph format's `training` keys (micro_batch, global_batch,
    dtype, recompute, distributed_optimizer, overlap_grad_reduce, ...); a key not given reads as
    the library's default."""

    _defaults = json.loads(_syssim.training_defaults())

    def __init__(self, *, micro_batch=None, global_batch=None, dtype=None, recompute=None,
                 use_distributed_optimizer=None, fp16=False, bf16=False, fp8=False, **more):
        given_optimizer = False if use_distributed_optimizer is None else use_distributed_optimizer  # None: not given
        for name, on in (("use_distributed_optimizer", given_optimizer), ("fp16", fp16), ("bf16", bf16), ("fp8", fp8)):
            if not isinstance(on, bool):
                raise ValueError(f"TrainingConfig: {name}={on!r}: expected True or False")
        if use_distributed_optimizer is not None and "distributed_optimizer" in more and \
                more["distributed_optimizer"] != use_distributed_optimizer:
            raise ValueError("TrainingConfig: distributed_optimizer and use_distributed_optimizer (its spec name) "
                             "disagree")
        flags = [name for name, on in (("fp16", fp16), ("bf16", bf16), ("fp8", fp8)) if on]
        if len(flags) + (dtype is not None) > 1:
            raise ValueError("TrainingConfig: select one precision (dtype= or one of fp16=/bf16=/fp8=)")
        given = {"micro_batch": micro_batch, "global_batch": global_batch,
                 "dtype": dtype if dtype is not None else (flags[0] if flags else None), "recompute": recompute}
        fields = {k: v for k, v in given.items() if v is not None}
        if use_distributed_optimizer:
            fields["distributed_optimizer"] = True
        super().__init__({**fields, **more})

    @property
    def use_distributed_optimizer(self):
        """The spec's name of distributed_optimizer, which a sharding strategy beyond no_shard implies."""
        return bool(self.distributed_optimizer) or self.data_parallel_sharding_strategy not in (None, "no_shard")

    @use_distributed_optimizer.setter
    def use_distributed_optimizer(self, on):
        self._assign("distributed_optimizer", on)


def _model_of(model):
    if isinstance(model, HFModel):
        model = model.resolve()
    elif isinstance(model, (str, os.PathLike)):
        model = load_model_yaml(model)
    if not isinstance(model, ModelConfig):
        raise ValueError(f"model: expected a path, a preset name, a ModelConfig or an HFModel, got {model!r}")
    return model


def _hardware_of(hardware):
    if isinstance(hardware, (str, os.PathLike)):
        hardware = load_hardware_yaml(hardware)
    if not isinstance(hardware, HardwareConfig):
        raise ValueError(f"hardware: expected a path, a preset name or a HardwareConfig, got {hardware!r}")
    return hardware


def _config_of(config, kind, name):
    """A ParallelismConfig or TrainingConfig (`kind`), given as one, as a dict of its keys or not at all."""
    if config is None:
        return kind()
    if isinstance(config, dict):
        return kind(**config)
    if not isinstance(config, kind):
        raise ValueError(f"{name}: expected a {kind.__name__} or a dict of its keys, got {config!r}")
    return config


def _job(model, hardware, parallelism, training):
    """The arguments of the native simulate and sweep."""
    hardware = _hardware_of(hardware)
    parallelism = _config_of(parallelism, ParallelismConfig, "parallelism")
    training = _config_of(training, TrainingConfig, "training")
    return (json.dumps(_model_of(model).to_dict()), json.dumps(hardware.to_dict()), hardware._folder,
            _json_of(parallelism, "parallelism"), _json_of(training, "training"))


def _json_of(config, section):
    """A ParallelismConfig's or TrainingConfig's fields as the JSON text the library reads. JSON
    has no inf or nan: a field holding one is refused by name, as the library refuses a bad value."""
    fields = config.to_dict()
    for key, value in fields.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{section}: key '{key}' must be finite, got {value!r}")
    return json.dumps(fields)


class SimulationReport:
    """The report of one simulated step: the fields of `syssim run --format json`
    (docs/syssim-report.md) as attributes; str() is the text report. A memory estimate's
    (`syssim memory --format json`) reads its runtime fields as zero, as the spec has it."""

    # The runtime fields a memory estimate has not simulated, with their zero.
    _RUNTIME_ZERO = {"step_time_ms": 0.0, "forward_ms": 0.0, "backward_ms": 0.0, "optimizer_ms": 0.0,
                     "collective_total_ms": 0.0, "collective_exposed_ms": 0.0, "by_op_type_ms": {},
                     "model_flops_per_step": 0.0, "achieved_tflops": 0.0, "mfu": 0.0, "hfu": 0.0,
                     "per_pp_rank_step_time_ms": [], "tokens_per_s_per_gpu": 0.0, "bubble_fraction": 0.0,
                     "collective_by_group_ms": {}, "collective_slowdown": 0.0, "host_busy_ms": 0.0,
                     "mfu_model_flops_per_step": 0.0, "step_time_band_ms": None, "step_time_band": None,
                     "mfu_convention": None}

    def __init__(self, json_text, text, memory_only=False):
        self._json = json_text
        self._text = text
        self._fields = json.loads(json_text)
        self._memory_only = memory_only

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields", {})
        if name in fields:
            return fields[name]
        if self.__dict__.get("_memory_only") and name in self._RUNTIME_ZERO:
            return self._RUNTIME_ZERO[name]
        raise AttributeError(f"SimulationReport has no field '{name}'")

    def to_dict(self):
        """The fields as a dict; a memory estimate's runtime fields at zero, as its attributes read."""
        fields = json.loads(self._json)
        return {**self._RUNTIME_ZERO, **fields} if self._memory_only else fields

    def to_json(self, path=None):
        """The JSON text `syssim run --format json` prints for the job (`syssim memory --format json`
        for a memory estimate); also written to path."""
        return _written(self._json, path)

    def to_dataframe(self):
        """One row, nested fields flattened with dots (memory.param_gb, ...)."""
        import pandas
        return pandas.json_normalize(self.to_dict())

    def __str__(self):
        return self._text

    __repr__ = __str__


def simulate(*, model, hardware, parallelism=None, training=None, workdir=None):
    """Trace, shard, price and simulate one training step (docs/python.md)."""
    return SimulationReport(*_syssim.simulate(*_job(model, hardware, parallelism, training), False, []))


def estimate_memory(*, model, hardware, parallelism=None, training=None, workdir=None):
    """Per-GPU memory only: no discrete-event simulation."""
    return SimulationReport(*_syssim.simulate(*_job(model, hardware, parallelism, training), True, []),
                            memory_only=True)


def _axis_value(value):
    """A swept value as the YAML scalar the library reads: a string stays a string ("true",
    "1,2" and "null" too)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value)  # a double-quoted YAML scalar
    return str(value)


class SweepRow:
    """One point: inputs (the swept values), metrics (step_time_ms, mfu, peak_memory_gb), status
    (ok, oom or invalid), reason and step_time_band_ms ((low, high), None when invalid); report
    simulates the point's job on first use."""

    def __init__(self, row, job):
        self.inputs = dict(row["inputs"])
        self.status = row["status"]
        self.reason = row.get("reason", "")
        self.metrics = {key: row[key] for key in ("step_time_ms", "mfu", "peak_memory_gb") if key in row}
        band = row.get("step_time_band_ms")
        self.step_time_band_ms = tuple(band) if band else None
        self._job = job
        self._report = None

    @property
    def report(self):
        if self._report is None and self.status != "invalid":
            # The point's settings applied as the sweep applied them (a strategy's alias, a
            # list key's one name).
            settings = [(path, _axis_value(value)) for path, value in self.inputs.items()]
            self._report = SimulationReport(*_syssim.simulate(*self._job, False, settings))
        return self._report

    def __repr__(self):
        return f"SweepRow(inputs={self.inputs!r}, status={self.status!r}, metrics={self.metrics!r})"


class Sweep:
    """The points of a sweep, in the order of the cartesian product."""

    def __init__(self, rows):
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)

    def best(self, metric):
        """The ok row best by metric (mfu highest; step_time_ms and peak_memory_gb lowest), or None."""
        if metric not in ("mfu", "step_time_ms", "peak_memory_gb"):
            raise ValueError(f"metric '{metric}': expected mfu, step_time_ms or peak_memory_gb")
        ok = [row for row in self.rows if row.status == "ok"]
        if not ok:
            return None
        sign = -1 if metric == "mfu" else 1
        return min(ok, key=lambda row: sign * row.metrics[metric])

    def to_dataframe(self):
        import pandas
        return pandas.DataFrame([{**row.inputs, "status": row.status, **row.metrics} for row in self.rows])


def sweep(*, model, hardware, parallelism=None, training=None, over, workdir=None, threads=0, use_cache=True):
    """Every combination of `over` ({"parallelism.tp": [1, 2, 4], ...}) on the job; use_cache=False
    simulates every point, as `syssim sweep --no-cache`."""
    model = _model_of(model)
    hardware = _hardware_of(hardware)
    parallelism = _config_of(parallelism, ParallelismConfig, "parallelism")
    training = _config_of(training, TrainingConfig, "training")
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise ValueError(f"threads: expected 0 (one per core) or more, got {threads!r}")
    if not isinstance(over, dict):
        raise ValueError(f"over: expected a dict of config paths and lists of values, got {over!r}")
    for path, values in over.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ValueError(f"over['{path}']: expected a list of values, got {values!r}")
    # recompute=None is no recomputation, as TrainingConfig(recompute=None) takes it.
    axes = [(path, [_axis_value("none" if v is None and path == "training.recompute" else v) for v in values])
            for path, values in over.items()]
    # The job as swept, as text: a row's report must not follow later changes to the objects given.
    job = _job(model, hardware, parallelism, training)
    text = _syssim.sweep(*job, axes, threads, use_cache)
    return Sweep([SweepRow(row, job) for row in json.loads(text)])


from . import stages  # noqa: E402  (the stages one by one: syssim.stages)


class Trace:
    """A job's traced step under its layout and training settings (`graph`, a stages.Graph with
    the trace and shard sections, and its provenance: model, parallelism, training);
    simulate_on(hardware) prices and simulates it there."""

    def __init__(self, graph):
        self.graph = graph

    @property
    def model(self):
        return ModelConfig._checked(json.dumps(self.graph.to_dict()["model"]))

    @property
    def parallelism(self):
        # As syssim.stages.shard was given it; a graph sharded otherwise: its sizes, and the
        # pipeline as the shard stage laid it out (which resolves decoder_first/last and account_for_*).
        graph = self.graph.to_dict()
        given = [p["args"][0] for p in graph.get("provenance", []) if p.get("tool") == "syssim.stages.shard"]
        if given:
            return ParallelismConfig(**json.loads(given[-1]))
        shard = graph["shard"]
        return ParallelismConfig(**shard["parallelism"], pipeline_schedule=shard["pipeline_schedule"],
                                 pp_layout=shard["pp_layout"])

    @property
    def training(self):
        return TrainingConfig(**self.graph.to_dict()["shard"]["training"])

    def simulate_on(self, hardware):
        """The SimulationReport of the step on `hardware` (the graph itself is left as it is)."""
        graph = stages.memory(stages.simulate(stages.cost(self.graph, hardware)))
        return SimulationReport(stages.report(graph, "json"), stages.report(graph, "text"))

    def __repr__(self):
        return f"Trace({self.graph!r})"


def trace(*, model, parallelism=None, training=None, workdir=None):
    """The traced step of a job, to simulate on one hardware or several (Trace.simulate_on)."""
    return Trace(stages.shard(stages.trace(model), parallelism, training))
