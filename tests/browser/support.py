"""What browser tests of a served script share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from backend.child import served


@contextmanager
def served_script(tmp: pytest.TempPathFactory, name: str, text: str) -> Iterator[str]:
    """`uopviz serve` of one script written to a folder of its own (the folder the server may read); yields the URL
    it printed, with its token."""
    folder = tmp.mktemp("scripts")
    (folder / name).write_text(text)
    with served(str(tmp.mktemp("cache")), str(folder / name)) as url:
        yield url
