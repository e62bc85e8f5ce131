"""Typed, frozen settings of an audit and the one place each default lives.

The CLI parses its options into these values and hands them to the library
(:func:`replaylens.report.run_audit`); the Python API builds the same values from keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import ConfigError

__all__ = [
    "AUTO_ARRAY_THREADS",
    "DEFAULT_CELLS",
    "DEFAULT_KEEP_RUNS",
    "DEFAULT_LEVEL",
    "DEFAULT_LLM_CONCURRENCY",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SHARD_MEMORY",
    "PROVIDERS",
    "STATISTICS_THREADS",
    "STRUCTURAL_CELLS",
    "AuditSettings",
    "Execution",
    "ModelSpec",
    "cell_list",
    "keep_runs",
]

DEFAULT_CELLS: tuple[str, ...] = ("value", "pair", "key_slot", "mask", "reorder", "rename")
"""The cells an audit replays besides aligned unless told otherwise (``audit``, ``check-writer``, ``demo``)."""

STRUCTURAL_CELLS: tuple[str, ...] = ("value", "pair", "key_slot")
"""The paper's three structural cells: the default of the low-level :func:`replaylens.replay` / ``plan_replay``."""

DEFAULT_RESAMPLES = 20_000
"""Stream-cluster bootstrap draws (and sign-flip draws) of an audit."""

DEFAULT_LEVEL = 0.95
"""Interval level of an audit."""

DEFAULT_LLM_CONCURRENCY = 4
"""Concurrent model requests of an audited LLM agent (remote endpoints)."""

DEFAULT_SHARD_MEMORY = 256 * 2**20
"""Memory budget of one vectorized shard, in bytes."""

AUTO_ARRAY_THREADS = 2
"""Shards of a thread-safe array agent (``thread_safe = True``: the built-in agents) run at once by the ``auto``
backend, where the machine has that many CPUs (each within its own shard memory budget)."""

STATISTICS_THREADS = 4
"""Most threads the shared resamples of an audit's statistics run on (fewer where the process may use fewer CPUs:
its affinity mask); the bytes do not depend on it."""

DEFAULT_KEEP_RUNS = 20
"""Complete runs an output directory keeps (``--keep-runs``, config ``keep_runs``, ``keep_runs=``, ``replaylens
prune --keep``): the most recently published ones, the run just written always among them; older complete runs
are removed once a new one is published.  Interrupted runs (resumable) are never counted or removed.  Twenty: a
day of the edit-and-rerun loop, each run a kept, instantly resumable version of the agent, at a bounded cost on
disk (docs/decisions.md)."""

PROVIDERS = ("openai", "local", "scripted")
"""Model providers: any OpenAI-compatible endpoint, a local GGUF file through llama-cpp-python, a scripted rule."""


def cell_list(cells: str | Sequence[str]) -> tuple[str, ...]:
    """``"value,pair"`` or ``["value", "pair"]`` → ``("value", "pair")`` (order kept, blanks dropped)."""
    items = cells.split(",") if isinstance(cells, str) else list(cells)
    return tuple(c.strip() for c in items if c.strip())


def keep_runs(value: int | str | None) -> int | None:
    """A retention setting: ``N`` (>= 1) complete runs kept, or ``"all"`` / None (never pruned) -> None."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "all"):
        return None
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ConfigError(f"keep_runs must be a number of runs (>= 1) or 'all'; got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"keep_runs must be a number of runs (>= 1) or 'all'; got {value!r}")
    return value


@dataclass(frozen=True)
class ModelSpec:
    """A model named ``provider/name``: ``openai/NAME``, ``local/PATH.gguf`` or ``scripted/RULE`` (parsed once)."""

    provider: str
    name: str

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        provider, sep, name = text.partition("/")
        if not sep or not name:
            raise ConfigError(f"model must look like openai/NAME, scripted/RULE or local/PATH; got {text!r}")
        if provider not in PROVIDERS:
            raise ConfigError(f"unknown model provider {provider!r}; use openai/NAME, scripted/RULE or local/PATH")
        return cls(provider, name)

    @property
    def is_local(self) -> bool:
        return self.provider == "local"

    @property
    def is_scripted(self) -> bool:
        return self.provider == "scripted"

    @property
    def is_remote(self) -> bool:
        """A model behind a network endpoint (requests cost money and time; an API key may be needed)."""
        return self.provider == "openai"

    def __str__(self) -> str:
        return f"{self.provider}/{self.name}"


@dataclass(frozen=True)
class Execution:
    """Where and how the shards of a replay run; the decisions are the same whatever is chosen.

    ``backend``: auto, serial, threads, processes or ray (auto: ray with a ``ray_address``, processes with
    ``workers`` > 1, threads with ``concurrency`` > 1, else serial).  ``shard_memory`` is in bytes.
    ``ray_runtime_env``: Ray's ``runtime_env`` for the workers (pip requirements, ``working_dir``, ...).
    """

    backend: str = "auto"
    workers: int | None = None
    concurrency: int | None = None
    ray_address: str | None = None
    shard_memory: int | None = None
    ray_runtime_env: Mapping[str, Any] | str | None = field(default=None, hash=False)

    def __post_init__(self) -> None:   # --ray-runtime-env's JSON or file: one line now, not after the inputs are read
        object.__setattr__(self, "ray_runtime_env", _runtime_env(self.ray_runtime_env))

    @property
    def resolved_backend(self) -> str:
        """The backend asked for, with "a Ray address means the Ray backend" decided here and only here."""
        return "ray" if self.ray_address and self.backend == "auto" else self.backend

    def replay_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`replaylens.replay.PreparedReplay.run`."""
        return {"backend": self.resolved_backend, "workers": self.workers, "concurrency": self.concurrency,
                "ray_address": self.ray_address, "shard_memory": self.shard_memory,
                "ray_runtime_env": self.ray_runtime_env}


def _runtime_env(text: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``--ray-runtime-env``: a JSON object, or the path of a file holding one (``.yaml``/``.yml``: YAML)."""
    if text is None or isinstance(text, Mapping):
        return dict(text) if text is not None else None
    import importlib
    import json
    from pathlib import Path

    src = text.strip()
    what = "--ray-runtime-env"
    if not src.startswith("{"):
        path = Path(src).expanduser()
        if not path.is_file():
            raise ConfigError(f"{what} must be a JSON object or the path of a JSON/YAML file; {text!r} is neither")
        what = f"{what} file {str(path)!r}"
        try:
            src = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {what}: {exc}") from None
        if path.suffix in (".yaml", ".yml"):
            try:
                yaml: Any = importlib.import_module("yaml")   # installed with ray
            except ImportError:
                raise ConfigError(f"{what} is YAML, which needs PyYAML (installed with the ray extra)") from None
            try:
                value = yaml.safe_load(src)
            except yaml.YAMLError as exc:
                raise ConfigError(f"{what} is not valid YAML: {str(exc).splitlines()[0]}") from None
            return _env_object(value, what)
    try:
        value = json.loads(src)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} is not valid JSON: {exc}") from None
    return _env_object(value, what)


def _env_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must hold a JSON object (e.g. {{\"pip\": [\"numpy\"]}}); got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class AuditSettings:
    """Everything that decides an audit's result besides its inputs and agent, plus how it runs.

    ``cells``/``maps``/``draws``/``repeats``/``seed``/``rng`` make the replay plan; ``n_resamples``/``level``
    the inference; ``path`` the replay path (auto, array, reference); ``execution`` where shards run.
    ``repeats=None``: 2 for a declared stochastic agent under independent generators, else 1.  ``rng``:
    ``"independent"`` per-decision generators, or ``"common"`` random numbers (a decision's generator depends
    on seed, stream, task and repeat only).  ``on_inconclusive``: what an INCONCLUSIVE declared verdict does to
    the gate, ``"pass"`` (the default) or ``"fail"`` (docs/guide/verdicts.md); it decides no decision.
    """

    cells: tuple[str, ...] = DEFAULT_CELLS
    maps: str | tuple[str, ...] | None = None
    draws: int | tuple[Any, ...] = 1
    repeats: int | None = None
    seed: int = 0
    rng: str = "independent"
    n_resamples: int = DEFAULT_RESAMPLES
    level: float = DEFAULT_LEVEL
    path: str = "auto"
    execution: Execution = field(default_factory=Execution)
    on_inconclusive: str = "pass"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cells", cell_list(self.cells))
        if isinstance(self.maps, list):
            object.__setattr__(self, "maps", tuple(self.maps))
        if isinstance(self.draws, list):
            object.__setattr__(self, "draws", tuple(self.draws))
        if self.repeats is not None and self.repeats < 1:
            raise ConfigError(f"repeats must be >= 1; got {self.repeats}")
        if self.n_resamples < 1:
            raise ConfigError(f"n_resamples must be >= 1; got {self.n_resamples}")
        if not 0.5 <= self.level < 1:
            raise ConfigError(f"level must be in [0.5, 1); got {self.level}")
        if self.rng not in ("independent", "common"):
            raise ConfigError(f"rng must be independent or common; got {self.rng!r}")
        if self.path not in ("auto", "array", "reference"):
            raise ConfigError(f"path must be auto, array or reference; got {self.path!r}")
        if self.on_inconclusive not in ("pass", "fail"):
            raise ConfigError(f"on_inconclusive must be pass or fail; got {self.on_inconclusive!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
