"""The exceptions raised for bad input to the Whisper application."""

from metal_backend.io import InputError


class WhisperError(InputError):
    """A file or argument the Whisper application cannot use.

    The message names the file (when there is one) and what is wrong with it.
    Derives from metal_backend.io.InputError (and so from ValueError): callers that validate
    input generically catch it.
    """


class SettingLimitError(WhisperError):
    """A setting whose cost would exceed the bound the application puts on it (for example a
    fallback sequence of a billion temperatures, or a thousand beams).

    name, value and limit say which setting, what it was given and its bound (the most it may
    be, or for a step the least); the message names all three.
    """

    def __init__(self, name: str, value: object, limit: object, why: str):
        super().__init__(f"{name}={value!r} is past its limit ({limit!r}): {why}")
        self.name = name
        self.value = value
        self.limit = limit
