"""`uopviz profile script.py`: runs the script as `python script.py` would, prints its kernels by the script's lines,
writes the profile's document with --json; a missing script, a failing one and one that runs no kernel say so with
their exit status."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from uopviz.cli import main
from uopviz.profile import Profile

SCRIPT = """
    import sys
    import numpy as np
    from uopviz import Tensor
    a = Tensor(np.ones((7, 5), np.float32))
    b = (a @ Tensor(np.ones((5, 3), np.float32))).relu()
    print("sum", b.sum().item(), sys.argv[0].endswith("model.py"), sys.argv[1:], a.device)
"""


def test_profile_a_script(tmp_path: Path, capsys: pytest.CaptureFixture[str], device: str) -> None:
    script, out = tmp_path / "model.py", tmp_path / "p.json"
    script.write_text(textwrap.dedent(SCRIPT))
    argv = list(sys.argv)
    assert main(["profile", "--device", device, "--top", "2", "--json", str(out), str(script), "--steps", "3"]) == 0
    assert sys.argv == argv
    text = capsys.readouterr().out
    assert f"sum 105.0 True ['--steps', '3'] {device}" in text  # the script's argv, the default device as given
    assert "model.py:7 in <module>: print(" in text
    p = Profile.from_dict(json.loads(out.read_text()))
    assert {r.device for r in p.runs} == {device} and all(r.kernel in text for r in p.runs)


@pytest.mark.parametrize(("body", "args", "status", "message"), [
    (None, [], 2, "no file"),
    ("raise ValueError('boom')", [], 1, "failed: ValueError: boom"),
    ("import sys; sys.exit(3)", [], 1, "exited with status 3"),
    ("x = 1", [], 1, "ran no kernel"),
    ("x = 1", ["--device", "TPU"], 2, "unknown device 'TPU'"),
])
def test_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str | None, args: list[str], status: int,
                message: str) -> None:
    script = tmp_path / "model.py"
    if body is not None:
        script.write_text(body + "\n")
    assert main(["profile", *args, str(script)]) == status
    assert message in capsys.readouterr().err
