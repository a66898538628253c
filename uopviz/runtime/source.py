"""What kernel source may reach a native compiler: only text of the forms the renderer writes.

The renderer is the only legitimate author of kernel source, and its preprocessor lines are a handful of fixed
forms (the dialects' preambles and the CPU's FMA helpers). Source from elsewhere (a Source stored in a trace file,
text passed to `CPURuntime.library`) could otherwise make the compiler read any file it names: `#include
"/etc/passwd"` prints the file's first line in the compiler's error, and a FIFO hangs the compiler. So every
preprocessor line must be one of those forms, and nothing that reads a file by another route (`_Pragma`,
`__has_include`, `__has_embed`, an assembler's `.incbin` through `asm`, a trigraph spelling of `#`) may appear.

Checked source then reaches the C and OpenCL compilers as a `unit`: its names its own, so that many kernels compile
in one run (a CPU batch's library, a CL batch's program).
"""

from __future__ import annotations

import hashlib
import re

from uopviz.runtime.device import CompileError

DIRECTIVE = re.compile(r"#\s*(?:include <math\.h>|if defined\(__[A-Za-z0-9_]+__\)|else|endif"
                       r"|pragma OPENCL EXTENSION cl_khr_fp(?:16|64) : enable"
                       r"|define (?:INFINITY|NAN) \(__int_as_float\(0x[0-9a-f]{8}\)\))")
"""The preprocessor lines the renderer writes (renderer/dialect.py: each dialect's preamble, CDialect's FMA helper),
whitespace runs read as one space."""

_FILE_READERS = re.compile(r"\b(?:_Pragma|__has_include|__has_include_next|__has_embed)\b")
_ASM = re.compile(r"\b(?:asm|__asm|__asm__)\b")
_TRIGRAPH = re.compile(r"\?\?[=(/)'<!>-]")
_QUOTE = re.compile("'")
_STRING = re.compile('"')
_RAW_STRING = re.compile('R"')
_SPLICE = re.compile(r"\\[ \t\f\v]*(?:\r\n|\r|\n)")  # a backslash ending a line joins the next (GCC allows blanks)
# comments, string literals, and everything else, in the order a compiler reads them: unambiguous once character
# literals (and C++'s digit separators, which look like them) and raw strings are refused
_TOKENS = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"(?:\\.|[^\"\\\n])*\"?|[^/\"]+|/", re.S)


class UntrustedSourceError(CompileError):
    """Kernel source with a line the renderer never writes, which could make the compiler read a file."""


def check_source(source: str, device: str, name: str, asm: bool = False) -> None:
    """UntrustedSourceError unless every preprocessor line of source is one the renderer writes (DIRECTIVE) and
    nothing else in it can make the compiler read a file. asm: the dialect writes inline assembly in string literals
    (CUDA's PTX, which reads no file); other dialects write no string literal at all."""
    for bad, what in ((_TRIGRAPH, "a trigraph (which some compilers read as another character)"),
                      (_QUOTE, "a character literal or digit separator"),
                      (_RAW_STRING, "a raw string literal") if asm else (_STRING, "a string literal")):
        if m := bad.search(source):
            _refuse(source, device, name, _line_of(source, m.start()), what)
    code = "".join(" " if t[:2] in ("//", "/*") else '""' if t[0] == '"' else t
                   for t in _TOKENS.findall(_SPLICE.sub("", source)))  # comments read as a space
    for line in code.splitlines():
        text = " ".join(line.split())
        if text.startswith("%:"):  # the digraph of #
            text = "#" + text[2:]
        if text.startswith("#") and not DIRECTIVE.fullmatch(text):
            _refuse(source, device, name, text, "a preprocessor line the renderer never writes")
    if m := _FILE_READERS.search(code) or (None if asm else _ASM.search(code)):
        _refuse(source, device, name, m.group(), "an operator the renderer never writes for this device")


def _line_of(text: str, at: int) -> str:
    return text[text.rfind("\n", 0, at) + 1:].split("\n", 1)[0].strip()


def _refuse(source: str, device: str, name: str, found: str, what: str) -> None:
    raise UntrustedSourceError(
        device, name, source,
        f"the source has {what}: {found[:200]!r}. Only source as the renderer writes it from a kernel's Linear "
        "program is compiled, so that no kernel text can make a compiler read a file: render the kernel again")


_HELPER = re.compile(r"^static inline (?:__attribute__\(\(\w+\)\) )?[^(]*?(\w+)\(", re.M)


def exported(source: str, name: str) -> str:
    """What the function `name` of a kernel's source (its entry point, a CPU kernel's THREAD entry `<name>_task`, a
    static helper) is called in its library or program: the name and a digest of the source, so that kernels of one
    name (one shape, other ops) share a batch's library (CPU) or program (CL) without meeting."""
    return f"{name}_{hashlib.sha256(source.encode()).hexdigest()[:16]}"


def unit(source: str, name: str) -> str:
    """What a kernel is compiled from, alone or as one part of a batch's translation unit: source (checked by
    check_source) with its entry points renamed as `exported` says and its static helpers (the renderer's, at the
    start of a line) renamed with the same digest, so that two kernels' helpers of one name never meet. The compiler
    numbers its lines from the source's first (`#line 1`), as a CompileError shows them."""
    names = [name, f"{name}_task", *dict.fromkeys(_HELPER.findall(source))]
    return "".join(f"#define {n} {exported(source, n)}\n" for n in names) + "#line 1\n" + source + "\n" + \
        "".join(f"#undef {n}\n" for n in names)
