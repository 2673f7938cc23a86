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


def one_line(err: BaseException) -> str:
    """The whole message of `err` on one line, as the command line and a failing job print a
    bad input: a colon-ended line runs on into the lines it introduces (as first_line), the
    other lines are joined by '; '."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    text = lines[0]
    for previous, line in zip(lines, lines[1:]):
        text += f" {line}" if previous.endswith(":") else f"; {line}"
    return text
