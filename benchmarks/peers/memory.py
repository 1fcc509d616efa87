"""Peak resident memory of this process, per step where Linux lets us reset the high-water mark.

Each engine runs in a process of its own, so ``ru_maxrss`` is that engine's peak. For a per-step
peak, writing ``5`` to ``/proc/self/clear_refs`` resets the kernel's high-water mark (VmHWM) to
the current RSS; VmHWM read after the step is then that step's peak. The reset also lowers what
``getrusage`` reports, so the process peak is kept here as the maximum seen before each reset.
Where the reset is not allowed, steps get no peak of their own and the process peak is
``ru_maxrss`` as usual.
"""

from __future__ import annotations

import resource

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _status_kib(field: str) -> int | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def _reset() -> bool:
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakMemory:
    def __init__(self) -> None:
        self._process_peak = _maxrss_kib()
        self.per_step = _status_kib("VmHWM") is not None and _reset()

    def _observe(self) -> None:
        self._process_peak = max(self._process_peak, _maxrss_kib(), _status_kib("VmHWM") or 0)

    def current_mib(self) -> float:
        return round((_status_kib("VmRSS") or 0) / 1024, 1)

    def start_step(self) -> float:
        """Reset the high-water mark; returns where it now stands (MiB), the step's baseline."""
        self._observe()
        if self.per_step:
            _reset()
            return round((_status_kib("VmHWM") or 0) / 1024, 1)
        return self.current_mib()

    def end_step(self) -> float | None:
        """This step's peak RSS in MiB (None where it cannot be isolated)."""
        self._observe()
        if not self.per_step:
            return None
        # The kernel raises VmHWM lazily (when RSS is about to drop): right after growth the
        # current RSS can be above it.
        return round(max(_status_kib("VmHWM") or 0, _status_kib("VmRSS") or 0) / 1024, 1)

    def process_peak_mib(self) -> float:
        self._observe()
        return round(self._process_peak / 1024, 1)
