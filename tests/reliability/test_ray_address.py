"""An unreachable `--ray-address`: one line and exit 2 within the connect timeout, and no study created.
As the probe met it, `--ray-address 127.0.0.1:1` hung for more than 90 s inside Ray's own retries (and
went on ~30 s after SIGTERM). The address is tried before Ray is even imported, so this holds with or
without the ray extra installed."""

from __future__ import annotations

import socket

import pytest

from hierconsole.study.db.storage import Store
from tests.reliability.conftest import TINY_RUN, cli, one_line_error

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # the CLI in subprocesses; Ray tests one at a time


def _closed_port() -> int:
    """A local port nobody listens at (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("form", ["{host}:{port}", "ray://{host}:{port}"])
def test_an_address_nobody_listens_at_is_one_line_and_creates_no_study(tiny_home, form):
    address = form.format(host="127.0.0.1", port=_closed_port())
    done = cli(tiny_home, *TINY_RUN, "--executor", "ray", "--ray-address", address, "--ray-connect-timeout", "5", timeout=60)
    text = one_line_error(done)
    assert f"--ray-address {address}: cannot reach a Ray cluster there" in text and "--ray-connect-timeout" in text
    with Store(tiny_home, read_only=True) as store:
        assert store.value("SELECT count(*) FROM studies") == 0


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_bad_connect_timeout_is_refused(tiny_home, value):
    done = cli(tiny_home, *TINY_RUN, "--executor", "ray", "--ray-connect-timeout", value, timeout=60)
    assert done.returncode == 2 and "--ray-connect-timeout" in done.stderr and "Traceback" not in done.stderr
