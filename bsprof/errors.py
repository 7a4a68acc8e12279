"""The one error type users see: a single line naming the problem and the fix."""


class BsprofError(Exception):
    """Bad input or environment. The CLI prints ``error: <message>`` and exits with code 2.

    Raise it from analyzers too: they stay free of click, the CLI turns it into the exit code.
    """

    exit_code = 2
