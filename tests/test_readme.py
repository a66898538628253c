"""README's Python examples run as written, in order, each block continuing the last as a reader runs them (so the
first thing a user tries keeps working), and print what their comments say."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 4, "README's python examples are fewer than the ones this test knows"
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    for code in blocks:
        exec(compile(code, str(README), "exec"), scope)
        if "uopviz.show(d)" in code:  # the widget block: its view moved and its opts set as the comments say
            assert (scope["w"].context, scope["w"].pass_index, scope["w"].step) == (1, 2, 3) and scope["w"].opts
    out = capsys.readouterr().out
    assert "['schedule', 'r_L5_L3_R4'" in out and (tmp_path / "softmax.uopviz-trace.json").exists()
    assert (tmp_path / "trace.html").stat().st_size > 0
    assert "(6, 3)\nNone [6. 6. 6. 6.]\n[ 4.  6.  8. 10.]\n" in out
    assert "r_g4_g8_w8_w4_R4_u2_u2_r16\nTrue\n" in out
