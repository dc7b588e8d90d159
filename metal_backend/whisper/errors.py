"""The exception raised for bad input to the Whisper application."""


class WhisperError(ValueError):
    """A file or argument the Whisper application cannot use.

    The message names the file (when there is one) and what is wrong with it.
    Derives from ValueError so callers that validate input generically catch it.
    """
