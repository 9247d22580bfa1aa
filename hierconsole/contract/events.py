"""Worker events: the typed, versioned messages a worker writes to its `events.jsonl` and the orchestrator
reads back. Each kind is a frozen dataclass here, with its fields and its idempotency key; workers emit
them, and ingest and every reader (the console's event log, re-score reconciliation) parse them here.

A line is one JSON object: ``{"v": SCHEMA_VERSION, "kind": ..., "key": ..., "ts": ..., <fields>}``. Lines
without ``"v"`` were written before the schema was versioned and are read as version 1, the same fields.
Fields a reader does not know are ignored (a newer worker may add some); a missing or mistyped field, an
unknown kind or a newer version makes the line malformed: it is reported with its file and line number
and skipped, never fatal. The key names what an event is about, so replaying a whole file after a crash
rewrites the same rows instead of adding new ones.
"""

from __future__ import annotations

import json
import math
import time
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

SCHEMA_VERSION = 1

LevelMetrics = dict[str, dict[str, float]]
"""level (leaf, middle, high) -> metric (mAP, R@K, valid_queries, groups) -> value."""


class EventKind(StrEnum):
    START = "start"
    INIT = "init"
    RESUME = "resume"
    EPOCH = "epoch"
    VAL = "val"
    CHECKPOINT = "checkpoint"
    FINAL = "final"
    NORMS = "norms"
    BASELINE_FIT = "baseline"  # at most 10 characters: the width of the console log's kind column
    METRICS = "metrics"
    RECONCILE = "reconcile"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class MalformedEvent(ValueError):
    """A line or payload that is not a valid event of this schema; the message says why."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of every event: when it was written (seconds since the epoch)."""

    KIND: ClassVar[EventKind]
    KEY_FIELDS: ClassVar[tuple[str, ...]] = ()
    """The fields that, after the kind, name what the event is about (joined by ":")."""
    ts: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        """What the event is about, unique within its job: the idempotency key of its rows."""
        return ":".join([str(self.KIND), *(str(getattr(self, name)) for name in self.KEY_FIELDS)])

    def fields(self) -> dict[str, Any]:
        """The event's own fields (without kind, key and ts), as plain JSON values."""
        out = asdict(self)
        del out["ts"]
        return out


@dataclass(frozen=True, kw_only=True)
class Start(Event):
    """A worker process began (again): where it runs."""

    KIND = EventKind.START
    KEY_FIELDS = ("pid",)
    pid: int
    device: str
    threads: int
    visible_devices: str | None = None
    # What determinism rests on (engine.determinism.DeviceSettings); absent from workers before them.
    device_name: str | None = None
    deterministic: str | None = None
    """"strict" or "warn" (torch.use_deterministic_algorithms) on CUDA; None on CPU."""
    cublas_workspace: str | None = None
    float32_matmul: str | None = None
    torch_version: str | None = None
    cuda_version: str | None = None
    jobs_in_process: int = 1
    """How many jobs this process trains as one stack (engine.stacked); 1 for a job of its own."""


@dataclass(frozen=True, kw_only=True)
class Init(Event):
    """A cell's identity and initial state, before its first update."""

    KIND = EventKind.INIT
    KEY_FIELDS = ("cell",)
    cell: str
    arm: str
    geometry: str
    loss: str
    tau: float | None
    trainable_params: int
    """The projector's (the parameter audit compares these across cells)."""
    init_sha256: str
    objective_params: int = 0
    """What the cell's objective adds to the projector's: leaf prototypes, HIER's proxies (0: none)."""


@dataclass(frozen=True, kw_only=True)
class Resume(Event):
    """The job continues from the checkpoint written after `epoch`; `notes` names each checkpoint file
    that was skipped and why. Epoch 0 with notes: none was usable, and training restarts from scratch."""

    KIND = EventKind.RESUME
    KEY_FIELDS = ("epoch",)
    epoch: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Epoch(Event):
    """One cell's training epoch: mean loss, updates so far and the batch order's hash."""

    KIND = EventKind.EPOCH
    KEY_FIELDS = ("cell", "epoch")
    cell: str
    epoch: int
    epochs: int
    train_loss: float
    updates: int
    batch_sha256: str
    seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class Validation(Event):
    """One cell's validation-split retrieval after `epoch`, and the score that ranks epochs: the hier
    score, or the preset's `training.selection_score` for a run that selects its epoch."""

    KIND = EventKind.VAL
    KEY_FIELDS = ("cell", "epoch")
    cell: str
    epoch: int
    aggregation: str
    metrics: LevelMetrics
    score: float


@dataclass(frozen=True, kw_only=True)
class Checkpoint(Event):
    """A checkpoint after `epoch` is on disk (atomically), with its SHA256."""

    KIND = EventKind.CHECKPOINT
    KEY_FIELDS = ("epoch",)
    epoch: int
    sha256: str


@dataclass(frozen=True, kw_only=True)
class Final(Event):
    """A cell's final model (`contract.layout.final_model`): its state hash, update count, reload check and
    validation-best epoch."""

    KIND = EventKind.FINAL
    KEY_FIELDS = ("cell",)
    cell: str
    final_sha256: str
    updates: int
    reload_max_diff: float
    best_epoch: int | None
    best_score: float | None


@dataclass(frozen=True, kw_only=True)
class Norms(Event):
    """The largest official-test embedding norm of a hyperbolic run, against the ball and its bound."""

    KIND = EventKind.NORMS
    KEY_FIELDS = ("run_id",)
    run_id: str
    max_norm: float
    radius: float
    bound: float


@dataclass(frozen=True, kw_only=True)
class BaselineFit(Event):
    """What a fitted baseline (pca) was fitted on: the samples' hash and count, and how many of them are
    official-test samples of the job (the audit requires none)."""

    KIND = EventKind.BASELINE_FIT
    KEY_FIELDS = ("run_id",)
    run_id: str
    arm: str
    fitted_sha256: str
    n_fitted: int
    test_overlap: int
    dim_in: int
    dim_out: int


@dataclass(frozen=True, kw_only=True)
class TestMetrics(Event):
    """Official-test metrics of one run on one Q/G perturbation under one aggregation."""

    __test__: ClassVar[bool] = False  # a name pytest would otherwise collect
    KIND = EventKind.METRICS
    KEY_FIELDS = ("run_id", "perturbation", "aggregation")
    run_id: str
    seed: int
    arm: str
    perturbation: int
    aggregation: str
    posthoc: bool
    metrics: LevelMetrics


@dataclass(frozen=True, kw_only=True)
class Reconcile(TestMetrics):
    """A re-score under the registered aggregation: compared with the stored endpoint, never stored as it."""

    KIND = EventKind.RECONCILE


@dataclass(frozen=True, kw_only=True)
class Done(Event):
    KIND = EventKind.DONE


@dataclass(frozen=True, kw_only=True)
class Failed(Event):
    KIND = EventKind.FAILED
    error: str
    """The traceback's tail."""


@dataclass(frozen=True, kw_only=True)
class Cancelled(Event):
    KIND = EventKind.CANCELLED
    message: str = ""


EVENT_TYPES: dict[EventKind, type[Event]] = {
    cls.KIND: cls
    for cls in (
        Start,
        Init,
        Resume,
        Epoch,
        Validation,
        Checkpoint,
        Final,
        Norms,
        BaselineFit,
        TestMetrics,
        Reconcile,
        Done,
        Failed,
        Cancelled,
    )
}

# -- serialising ----------------------------------------------------------------------------------------


def to_line(event: Event) -> str:
    """One JSON line (with its newline). NaN is kept as JSON's NaN extension: a diverged loss is data."""
    record = {"v": SCHEMA_VERSION, "kind": str(event.KIND), "key": event.key, "ts": event.ts}
    record.update(event.fields())
    return json.dumps(record, separators=(",", ":"), allow_nan=True) + "\n"


def payload(event: Event) -> str:
    """The event's fields as standard JSON (NaN and infinities become null), for the store's JSON column."""
    return json.dumps(_standard(event.fields()), allow_nan=False)


def _standard(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _standard(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_standard(v) for v in x]
    return x


# -- parsing --------------------------------------------------------------------------------------------


def from_record(record: Mapping[str, Any]) -> Event:
    """The event of a decoded JSON line; MalformedEvent says what is wrong with it."""
    version = record.get("v", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise MalformedEvent(f"schema version {version!r} is not a positive integer")
    if version > SCHEMA_VERSION:
        raise MalformedEvent(
            f"schema version {version} is newer than this hierconsole reads ({SCHEMA_VERSION}); upgrade it"
        )
    kind: Any = record.get("kind")  # unchecked JSON: EventKind() raises ValueError on anything else
    try:
        cls = EVENT_TYPES[EventKind(kind)]
    except ValueError:
        raise MalformedEvent(f"unknown event kind {kind!r}; known kinds: {', '.join(EVENT_TYPES)}") from None
    return from_fields(cls, record)


def from_payload(kind: str, data: Mapping[str, Any], ts: float = 0.0) -> Event:
    """The event stored in the store's events table (kind column, payload JSON, ts)."""
    return from_record({**data, "kind": kind, "ts": ts})


def from_fields(cls: type[Event], data: Mapping[str, Any]) -> Event:
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data or (f.name == "ts" and data[f.name] is None):
            if f.default is MISSING and f.default_factory is MISSING:
                raise MalformedEvent(f"{cls.KIND} event lacks field {f.name!r}")
            continue
        try:
            kwargs[f.name] = _coerce(data[f.name], hints[f.name])
        except MalformedEvent as exc:
            raise MalformedEvent(f"{cls.KIND} event field {f.name!r}: {exc}") from None
    if cls is Final and kwargs.get("best_epoch") is not None and kwargs["best_epoch"] < 0:
        # Version 1 workers wrote -1 for "never validated".
        kwargs["best_epoch"] = None
    return cls(**kwargs)


@dataclass(frozen=True)
class LineProblem:
    """A line of an events file that was skipped, and why."""

    path: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}; the line was skipped"


@dataclass
class EventsRead:
    events: list[Event]
    offset: int
    """Byte offset after the last complete line read: where the next read starts."""
    lines: int
    """Number of complete lines before `offset` (so the next read can number its lines)."""
    problems: list[LineProblem]


def read_events(path: Path, offset: int = 0, lines_before: int = 0) -> EventsRead:
    """The events of the complete lines of `path` from byte `offset` on.

    A worker killed mid-write leaves a torn last line without its newline: it is left for a later read
    (the next worker starts on a new line, so the fragment ends up a line of its own, reported as
    malformed once). `lines_before` is the number of lines before `offset`, for line numbers.
    """
    if not path.exists():
        return EventsRead([], offset, lines_before, [])
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n")
    if end < 0:
        return EventsRead([], offset, lines_before, [])
    events: list[Event] = []
    problems: list[LineProblem] = []
    raw_lines = data[: end + 1].split(b"\n")[:-1]
    for number, raw in enumerate(raw_lines, start=lines_before + 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            if not isinstance(record, dict):
                raise MalformedEvent(f"expected a JSON object, got {type(record).__name__}")
            events.append(from_record(record))
        except json.JSONDecodeError as exc:
            problems.append(LineProblem(path, number, f"not JSON ({exc.msg}; a worker killed mid-write?)"))
        except (MalformedEvent, UnicodeDecodeError) as exc:
            problems.append(LineProblem(path, number, str(exc)))
    return EventsRead(events, offset + end + 1, lines_before + len(raw_lines), problems)


# -- field types ----------------------------------------------------------------------------------------


def _hints(cls: type) -> dict[str, Any]:
    cached = _HINTS.get(cls)
    if cached is None:
        cached = _HINTS[cls] = typing.get_type_hints(cls)
    return cached


_HINTS: dict[type, dict[str, Any]] = {}


def _coerce(value: Any, hint: Any) -> Any:
    """`value` checked against a field's annotation (the few shapes events use)."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        inner = [o for o in options if o is not type(None)]
        return _coerce(value, inner[0])
    if hint is bool:
        if not isinstance(value, bool):
            raise MalformedEvent(f"expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise MalformedEvent(f"expected an integer, got {value!r}")
        return value
    if hint is float:
        # JSON null stands for NaN where a standard-JSON copy (the store's payload column) was read.
        if value is None:
            return math.nan
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MalformedEvent(f"expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise MalformedEvent(f"expected a string, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise MalformedEvent(f"expected an array, got {value!r}")
        (item,) = typing.get_args(hint)[:1]
        return tuple(_coerce(v, item) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise MalformedEvent(f"expected an object, got {value!r}")
        _, item = typing.get_args(hint)
        return {str(k): _coerce(v, item) for k, v in value.items()}
    raise TypeError(f"event field annotation {hint!r} has no parser")  # pragma: no cover - a bug here
