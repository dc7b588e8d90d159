"""The exception raised for bad input to the voice activity detector."""

from metal_backend.io import InputError


class VadError(InputError):
    """Samples, parameters or a weight file the VAD cannot use; the message names the value."""
