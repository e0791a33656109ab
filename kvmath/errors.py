"""The one user-error type: bad input (a flag, a file, a row, a field, a name) raises an
:class:`InputError`, which the CLI prints as one line and exit 2. Any other exception is a bug."""


class InputError(Exception):
    """Input kvmath cannot answer: the message names the file, row or line and field, and what
    was expected."""


class UsageError(InputError):
    """A combination of options or a setting the command cannot take."""
