"""Errors that the command line reports as one line and exit status 2."""


class DpvipInputError(ValueError):
    """A user-supplied value (flag, config key, file) is invalid; the message names it."""


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (library messages can span several), or its
    type when the message is empty. A first line ending in a colon only introduces the
    reason on the lines below (tarfile: "file could not be opened successfully:" and one
    line per method tried), so those lines are joined to it: the reason stays complete."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {'; '.join(lines[1:])}"
    return lines[0]
