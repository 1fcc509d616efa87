"""Servers the tests start for real on 127.0.0.1 (an S3 API, an Iceberg REST catalog): a free
port, and a process started in a session of its own, waited for until it answers HTTP, and
stopped by its process group."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator, Sequence

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(argv: Sequence[str], probe: str, log: Path, what: str,
                timeout: float = 60) -> Iterator[subprocess.Popen]:
    """Run ``argv`` (output to ``log``) until ``probe`` gets any HTTP answer; stop it at the end."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{what} exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(probe, timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # any HTTP answer means it is serving
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"{what} on {probe} did not answer within {timeout:.0f} s")
                time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
