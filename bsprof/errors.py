"""The one error type users see: a single line naming the problem and the fix."""


class BsprofError(Exception):
    """Bad input or environment. The CLI prints ``error: <message>`` and exits with code 2.

    Raise it from analyzers too: they stay free of click, the CLI turns it into the exit code.
    """

    exit_code = 2


def one_line(exc: BaseException, width: int = 160) -> str:
    """``Type: first line of the message`` (cut to ``width``): how a skipped peer or a failed
    import is reported in a table cell or a one-line error."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:width]}" if text else type(exc).__name__
