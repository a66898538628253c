"""The devices that start here and the opts each takes (`/api/meta`'s `device_opts`), found by starting their runtimes
in a child process when the server starts.

Listing a device means starting its runtime, and a started runtime stays in its process: OpenCL's driver (PoCL) adds
~75 MB, more than a big trace's outline, to a server that runs a kernel only when a request times or tunes one. The
child starts them and prints what it found; the server starts a runtime itself on the first request that needs it.
A process that never called `start()` (a notebook's widget, `uopviz export`) lists its devices itself.

    python -m uopviz.backend.device_list     # the child: prints {device: [opt labels]} as JSON
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import warnings

PROBE_TIMEOUT_S = 120.0

_lock = threading.Lock()
_probe: _Probe | None = None


def here() -> dict[str, list[str]]:
    """Per device that starts in this process (each runtime is started), the labels of the opts it takes."""
    from uopviz.backend.answers import offered, opt_choices

    from uopviz.runtime import device as devices
    choices = opt_choices()
    return {d: [c.label for c in choices if offered(c, devices.get(d).target)] for d in devices.available()}


class _Probe:
    """The child that lists the devices, run on a thread of its own so that the server starts meanwhile."""

    def __init__(self) -> None:
        self.answer: dict[str, list[str]] | None = None
        self.failure = ""
        self.thread = threading.Thread(target=self._run, name="uopviz-device-list", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            r = subprocess.run([sys.executable, "-m", "uopviz.backend.device_list"], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            self.failure = str(e)
            return
        if r.returncode != 0:
            self.failure = f"exit status {r.returncode}: {r.stderr.strip()[-2000:]}"
            return
        try:
            answer = json.loads(r.stdout)
        except json.JSONDecodeError as e:
            self.failure = f"unreadable answer ({e}): {r.stdout[:200]!r}"
            return
        if not (isinstance(answer, dict) and all(isinstance(v, list) for v in answer.values())):
            self.failure = f"unreadable answer: {r.stdout[:200]!r}"
            return
        self.answer = answer


def start() -> None:
    """List the devices in a child process from now on (begun at once; `device_opts` waits for it)."""
    global _probe
    with _lock:
        if _probe is None:
            _probe = _Probe()


def device_opts() -> dict[str, list[str]]:
    """Per device that starts here, the labels of the opts it takes: the child's answer where `start()` was called
    (listed here, runtimes started, should the child fail: a warning says why), else listed in this process."""
    probe = _probe
    if probe is None:
        return here()
    probe.thread.join()
    if probe.answer is None:
        warnings.warn(f"listing the devices in a child process failed ({probe.failure}); listed here instead",
                      RuntimeWarning, stacklevel=2)
        return here()
    return probe.answer


if __name__ == "__main__":
    json.dump(here(), sys.stdout)
