"""Errors that the command line reports as one line and exit status 2."""


class DpvipInputError(ValueError):
    """A user-supplied value (flag, config key, file) is invalid; the message names it."""
