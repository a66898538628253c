"""The error every reader of a trace document raises (the format check, the arg decoder)."""


class TraceFormatError(ValueError):
    """A file or document is not a trace this uopviz can read; the message says where and why."""
