"""The judges' environment is found or not, with the reason; a download that does not match its
pinned checksum installs nothing."""

from __future__ import annotations

import hashlib

import pytest

from tests.judges import environment


def test_an_environment_not_set_up_says_how_to_set_it_up(tmp_path, monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_JUDGES_HOME", str(tmp_path))
    judges, why = environment.find()
    assert judges is None and "make judges" in why and str(tmp_path) in why


def test_a_jar_whose_checksum_differs_is_not_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("LAKEHOUSE_JUDGES_HOME", str(tmp_path))
    served = b"not the released jar"

    class Response:
        def __init__(self, data):
            self.data = data

        def read(self, n=-1):
            out, self.data = self.data[:n] if n >= 0 else self.data, self.data[n:] if n >= 0 else b""
            return out

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(environment.urllib.request, "urlopen", lambda url, timeout: Response(served))
    with pytest.raises(SystemExit, match="is not the pinned"):
        environment.fetch("x.jar", "org/x/x.jar", "0" * 64)
    assert not (tmp_path / "jars" / "x.jar").exists()
    environment.fetch("x.jar", "org/x/x.jar", hashlib.sha256(served).hexdigest())
    assert (tmp_path / "jars" / "x.jar").read_bytes() == served
