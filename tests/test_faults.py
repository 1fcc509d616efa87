"""Fault points: inactive by default, ``raise`` and ``kill@marker`` (once across processes)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lakehouse import faults


def test_raise_fires_every_time_and_reset_clears(monkeypatch):
    faults.activate("x.point", "raise")
    try:
        for _ in range(2):
            with pytest.raises(faults.InjectedFault, match="x.point"):
                faults.fault_point("x.point")
        faults.fault_point("other.point")  # not activated: nothing happens
    finally:
        faults.reset()
    faults.fault_point("x.point")


def test_a_marker_makes_a_point_fire_once_across_processes(tmp_path):
    marker = tmp_path / "once"
    code = "from lakehouse.faults import fault_point; fault_point('p'); print('passed')"
    env = {**os.environ, faults.ENV: f"p:kill@{marker}",
           "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == -9 and marker.exists()  # SIGKILL, the marker left behind
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert second.returncode == 0 and second.stdout.strip() == "passed"
