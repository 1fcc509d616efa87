"""The ``reliability`` fixture: a test describes its scenario and the ledger records how it
ended (a failed test is recorded as FAILED whatever the case says)."""

from __future__ import annotations

import pytest

from tests.reliability.ledger import FAILED, Case, Ledger, output_dir

_LEDGER = Ledger()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item._reliability_outcome = rep.outcome


class _Recorder:
    def __init__(self, test: str) -> None:
        self.test = test
        self.cases: list[Case] = []

    def case(self, area: str, scenario: str, point: str | None = None, **kw) -> Case:
        c = Case(area=area, scenario=scenario, point=point, test=self.test, **kw)
        self.cases.append(c)
        return c


@pytest.fixture
def reliability(request):
    rec = _Recorder(request.node.nodeid)
    yield rec
    outcome = getattr(request.node, "_reliability_outcome", "failed")
    if outcome == "skipped":
        return
    for c in rec.cases:
        if outcome != "passed":
            c.outcome = FAILED
        _LEDGER.add(c)


def pytest_sessionfinish(session, exitstatus):
    if _LEDGER.cases:
        _LEDGER.write(output_dir())
