"""README's Python examples run as written (so the first thing a user tries keeps working)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, str(README), "exec"), {})
    out = capsys.readouterr().out
    assert "['schedule', 'r_L5_L3_R4'" in out and (tmp_path / "softmax.uopviz-trace.json").exists()
