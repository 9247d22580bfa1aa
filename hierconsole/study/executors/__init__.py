"""Executors: how a job's worker is started, watched and stopped. The orchestrator stays the same above them.

Every executor runs the same worker (`python -m hierconsole.engine.worker --home HOME SPEC`) on the same
job spec; what differs is where. `local` starts it as a subprocess of the orchestrator (the worker writes
its job folder in the home itself); `ray` starts it on a node of a Ray cluster, in a scratch home of its
own there, and brings its event lines and the files of its job folder home (`contract.transfer`), so that
the orchestrator reads `events.jsonl` and the checkpoints in the home exactly as it does a local job's.

An executor hands out one `Handle` per running attempt; the orchestrator polls handles, never processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from hierconsole.contract.jobspec import JobSpec
from hierconsole.errors import ConfigError
from hierconsole.vocabulary import EXECUTORS, Executor

ENV_EXECUTOR = "HIERCONSOLE_EXECUTOR"
"""The executor `run`, `resume` and the console use when none is named (default: local)."""
ENV_RAY_ADDRESS = "HIERCONSOLE_RAY_ADDRESS"
"""The Ray cluster `--executor ray` connects to when `--ray-address` is not given (default: a local
instance started for the command)."""
RAY_INSTALL = "pip install 'hierconsole[ray]'"
"""How to install Ray, the optional extra `--executor ray` needs."""
LOCAL_RAY = "local"
"""The `--ray-address` that starts a Ray instance in this process (it ends with the process)."""


RAY_CONNECT_TIMEOUT = 20.0
"""Seconds `--executor ray` waits for a cluster's address to answer before it gives up with one line
(`--ray-connect-timeout`); Ray's own connect retries for minutes on an address nobody listens at."""


def check_reachable(address: str, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Refuse, in one line and within `timeout` seconds, a HOST:PORT (or ray://HOST:PORT) address whose
    port does not accept a connection; `auto` and `local` name no address to try."""
    import socket

    if address in ("auto", LOCAL_RAY):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")  # an IPv6 literal, [::1]:6379
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except TimeoutError:
        why = f"no answer within {timeout:g} s"
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
    raise ConfigError(
        f"--ray-address {address}: cannot reach a Ray cluster there ({why}); check the head's address and "
        f"port (`ray status` on the head prints it), or raise --ray-connect-timeout for a slow network"
    )


class Handle(Protocol):
    """One running attempt of one job, as the orchestrator drives it."""

    executor: Executor
    pid: int
    """The process to show and to judge alive by: the worker (local), or the Ray worker process (ray)."""
    pid_start: str | None
    node: str
    """Where it runs: "local", or the Ray node ("host node-id")."""
    gpu: str | None

    def pump(self) -> None:
        """Bring what the worker wrote since the last call into its job folder in the home (events, files,
        heartbeat); nothing to do where the worker writes there itself."""

    def running(self) -> bool: ...

    def terminate(self) -> None:
        """Ask the worker to stop at its next batch (it emits `cancelled` and keeps its checkpoint)."""

    def kill(self) -> None:
        """End it now (after the cancel grace, or a frozen worker)."""

    def exit_note(self) -> str | None:
        """Why it ended without a final event (a crash), if the executor knows."""

    def release(self) -> None:
        """It ended and everything it sent was ingested: free what it holds."""

    def wait(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for it to end (no-op where there is nothing to reap)."""


class JobExecutor(Protocol):
    kind: Executor

    def capacity(self, max_parallel: int | None) -> int:
        """How many of its jobs may run at once, given `--parallel` (None: not given)."""

    def launch(self, job_id: str, folder: Path, spec: JobSpec, *, busy_gpus: set[str]) -> Handle: ...

    def close(self) -> None:
        """The orchestrator is done with it (a Ray instance it started ends here)."""


def executor_name(option: str | None) -> Executor:
    """`--executor`, else $HIERCONSOLE_EXECUTOR, else local; a bad value is a ConfigError naming its source."""
    value, source = (option, "--executor") if option is not None else (os.environ.get(ENV_EXECUTOR), ENV_EXECUTOR)
    if value is None or value == "":
        return Executor.LOCAL
    if value not in EXECUTORS:
        raise ConfigError(f"{source} {value!r}: the executor is one of {', '.join(EXECUTORS)}")
    return Executor(value)


def checked_executor(option: str | None, address: str | None) -> Executor:
    """The executor `--executor` (or $HIERCONSOLE_EXECUTOR) names, refusing a `--ray-address` beside a
    local one and checking a Ray one's address: what `run`, `resume` and `replicate` check before they
    start anything."""
    name = executor_name(option)
    if name == Executor.LOCAL and address is not None:
        raise ConfigError("--ray-address names the Ray cluster of --executor ray; add --executor ray")
    if name == Executor.RAY:
        ray_address(address)
    return name


def ray_address(option: str | None) -> str:
    """`--ray-address`, else $HIERCONSOLE_RAY_ADDRESS, else `local` (start an instance here)."""
    value, source = (
        (option, "--ray-address") if option is not None else (os.environ.get(ENV_RAY_ADDRESS), ENV_RAY_ADDRESS)
    )
    if value is None or value == "":
        return LOCAL_RAY
    value = value.strip()
    host_port = value.removeprefix("ray://")
    if value in ("auto", LOCAL_RAY) or (":" in host_port and host_port.rsplit(":", 1)[1].isdigit()):
        return value
    raise ConfigError(
        f"{source} {value!r}: give `auto` (the cluster this node belongs to), ray://HOST:PORT (Ray Client), "
        f"HOST:PORT (the head's GCS address) or `local` (start a Ray instance for this command)"
    )
