"""Errors that the command line reports as one line and exit status 2."""


class DpvipInputError(ValueError):
    """A user-supplied value (flag, config key, file) is invalid; the message names it."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (library messages can span several), or its
    type when the message is empty."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__
