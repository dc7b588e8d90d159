"""The base exception for input that metal_backend's applications cannot use."""


class InputError(ValueError):
    """A file, array or argument that cannot be used: the message names it and says what is wrong.

    The applications' own errors (WhisperError, VadError) derive from it, so one `except InputError`
    catches bad input to any of them; it derives from ValueError so generic validation code catches
    it too.
    """
