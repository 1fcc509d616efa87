"""The platform's REST client rides out Airflow's transient server errors without doubling runs.

On SQLite, Airflow answers 500 when a request's transaction meets another component's commit
("database is locked"); the CI once lost a whole session's platform to one such answer."""

from __future__ import annotations

import json

import httpx
import pytest

from deploy import platform as plat


class FakeAirflow:
    """Airflow's dagRuns endpoint as far as the client sees it: run ids unique per DAG (a
    duplicate is 409, as Airflow's unique-constraint handler answers), with scripted failures."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)  # per POST: "ok", "500" (nothing stored), "stored-then-500"
        self.runs: dict[str, dict] = {}
        self.posts = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            return httpx.Response(201, json={"access_token": "t"})
        if request.method == "POST":
            self.posts += 1
            body = json.loads(request.content)
            run_id = body["dag_run_id"]
            if run_id in self.runs:
                return httpx.Response(409, json={"detail": "Unique constraint violation"})
            step = self.script.pop(0) if self.script else "ok"
            if step == "500":
                return httpx.Response(500, text="sqlite3.OperationalError: database is locked")
            self.runs[run_id] = {"dag_run_id": run_id, "state": "queued", "conf": body["conf"]}
            if step == "stored-then-500":
                return httpx.Response(500, text="Internal Server Error")
            return httpx.Response(200, json=self.runs[run_id])
        run_id = request.url.path.rsplit("/", 1)[-1]
        if run_id in self.runs:
            return httpx.Response(200, json=self.runs[run_id])
        return httpx.Response(404, json={"detail": "not found"})


def _api(tmp_path, fake: FakeAirflow) -> plat.Api:
    return plat.Api(plat.Layout(tmp_path, 1, var=tmp_path / "var"), pw="x", transport=httpx.MockTransport(fake))


def test_a_locked_database_answer_is_asked_again(tmp_path):
    fake = FakeAirflow(["500", "500", "ok"])
    run_id = _api(tmp_path, fake).trigger("t_ingest", {"force": True})
    assert fake.posts == 3
    assert list(fake.runs) == [run_id] and fake.runs[run_id]["conf"] == {"force": True}


def test_a_run_created_before_the_error_is_found_not_doubled(tmp_path):
    fake = FakeAirflow(["stored-then-500"])
    run_id = _api(tmp_path, fake).trigger("t_ingest")
    assert fake.posts == 2  # the retry met the run the first attempt made
    assert list(fake.runs) == [run_id]


def test_an_error_that_stays_says_what_airflow_answered(tmp_path):
    fake = FakeAirflow(["500"] * 10)
    with pytest.raises(plat.PlatformError, match="refused to trigger t_ingest: HTTP 500.*database is locked"):
        _api(tmp_path, fake).trigger("t_ingest")
    assert fake.runs == {} and fake.posts == 6


def test_a_client_error_is_not_retried(tmp_path):
    def refuse(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            return httpx.Response(201, json={"access_token": "t"})
        refuse.calls += 1
        return httpx.Response(400, json={"detail": "Dag has import errors"})
    refuse.calls = 0
    api = plat.Api(plat.Layout(tmp_path, 1, var=tmp_path / "var"), pw="x", transport=httpx.MockTransport(refuse))
    with pytest.raises(plat.PlatformError, match="HTTP 400"):
        api.trigger("t_ingest")
    assert refuse.calls == 1
