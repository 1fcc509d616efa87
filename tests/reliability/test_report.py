"""docs/reliability.md is the suite's own report (``make reliability``): it must cover every
fault point the code defines and record no loss, or it is stale."""

from __future__ import annotations

import re

from lakehouse.faults import POINTS
from tests.reliability.ledger import AREAS, REPO_ROOT, Case, Ledger

DOC = REPO_ROOT / "docs" / "reliability.md"


def test_the_published_report_covers_every_fault_point_and_area():
    text = DOC.read_text()
    assert "Do not edit by hand" in text
    for p in POINTS:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{p}` |")), None)
        assert row is not None, f"{p} is not in docs/reliability.md: run `make reliability`"
        assert "not tried" not in row, f"{p} was not tried in the published run"
    for title in AREAS.values():
        assert f"## {title}" in text
    summary = re.search(r"\*\*(\d+) scenarios tried; (\d+) failed; data lost: (\d+)\.\*\*", text)
    assert summary and int(summary.group(1)) > 100
    assert summary.group(2) == "0" and summary.group(3) == "0"


def test_a_failed_case_is_reported_as_failed_and_a_loss_is_counted():
    ledger = Ledger()
    ledger.add(Case("crash", "a", "write.mid_data_file"))
    ledger.add(Case("crash", "b", "write.mid_data_file", outcome="FAILED", lost=2))
    md = ledger.markdown()
    assert "**2 scenarios tried; 1 failed; data lost: 2.**" in md
    assert "| `write.mid_data_file` | 2 | FAILED, survived | 2 |" in md
    assert "| `clean.mid_delete` | 0 | **not tried** | 0 |" in md
