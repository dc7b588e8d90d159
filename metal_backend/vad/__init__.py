"""Voice activity detection on the backend: Silero VAD v6.2 (MIT-licensed weights shipped here).

    from metal_backend.vad import SileroVad
    vad = SileroVad.load()                       # the shipped v6.2 weights, best real device
    vad.speech_probabilities(samples_16k)        # one probability per 512 samples (32 ms)
    vad.speech_segments(samples_16k)             # [(start_s, end_s), ...], silero-vad's rules
    vad.reset(); vad.push(chunk)                 # streaming: probabilities of completed windows
"""

from .errors import VadError
from .segments import SegmentOptions, speech_segments_from_probabilities
from .silero_file import SileroWeights, read_silero_file, write_silero_file
from .silero_vad import SileroVad, check_samples

__all__ = ["SegmentOptions", "SileroVad", "SileroWeights", "VadError", "check_samples", "read_silero_file",
           "speech_segments_from_probabilities", "write_silero_file"]
