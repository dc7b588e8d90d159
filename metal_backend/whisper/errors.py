"""The exception raised for bad input to the Whisper application."""

from metal_backend.io import InputError


class WhisperError(InputError):
    """A file or argument the Whisper application cannot use.

    The message names the file (when there is one) and what is wrong with it.
    Derives from metal_backend.io.InputError (and so from ValueError): callers that validate
    input generically catch it.
    """
