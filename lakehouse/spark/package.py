"""The ``lakehouse`` package as a zip for ``spark-submit --py-files``, for clusters whose
workers do not have it installed.

lakehouse is pure Python, so the zip is all its executors need besides pyarrow and fastavro
(which must be installed in the executors' Python, like pyspark's own dependencies).
Executors put the zip on ``sys.path`` and import from it directly. The zip is reproducible: the
same sources give the same bytes, so a scheduler that caches by content does not re-ship it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import zipfile
from pathlib import Path

import lakehouse
from lakehouse.spark.submit import submit_path

# 1980-01-01, the earliest time a zip entry can hold: entries carry no build time.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def package_root() -> Path:
    """The folder of the ``lakehouse`` package being run."""
    return Path(lakehouse.__file__).resolve().parent


def _files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        out += [Path(dirpath) / f for f in sorted(filenames)
                if not f.endswith((".pyc", ".pyo")) and not f.startswith(".")]
    return out


def build_py_files(dest_dir: str | os.PathLike, name: str = "lakehouse.zip") -> str:
    """Zip the ``lakehouse`` package into ``dest_dir/name``; returns the zip's absolute path.

    Use it as ``spark-submit --py-files <zip> .../lakehouse/spark/submit.py <app> ...``.
    """
    root = package_root()
    dest = Path(dest_dir).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / name
    tmp = dest / f".{name}.{os.getpid()}.tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for f in _files(root):
            info = zipfile.ZipInfo(f"lakehouse/{f.relative_to(root).as_posix()}", _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, f.read_bytes())
    # A submit running at the same time never sees a half-written zip.
    os.replace(tmp, target)
    return str(target)


def main(argv: list[str] | None = None) -> int:
    """Write ``lakehouse.zip`` and a copy of ``submit.py`` (spark-submit needs the application
    as a file of its own, not inside the zip) into one folder: all a cluster submit needs."""
    p = argparse.ArgumentParser(prog="python -m lakehouse.spark.package",
                                description="Write lakehouse.zip (for --py-files) and submit.py.")
    p.add_argument("dest_dir", help="folder to write them into")
    dest = p.parse_args(argv).dest_dir
    print(build_py_files(dest))
    print(shutil.copyfile(submit_path(), Path(dest).resolve() / "submit.py"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
