"""Whisper speech recognition, the reference application of metal_backend.

The modules here are pure Python and numpy: WAV input, the log-mel
spectrogram, model files (whisper.cpp ggml and CTranslate2), the tokenizer
and decoding (timestamps, beam search, temperature fallback, language detection,
the long-form loop). The network itself runs behind the small WhisperCompute
interface (compute.py), so the decoding logic is shared by every implementation.
BackendWhisper (backend_compute.py) runs it as metal_backend graphs, and Whisper
(model.py) ties loading, devices and transcription together. Stream (streaming.py) is live
transcription on top of Whisper.transcribe and the Silero VAD.
"""

from metal_backend.io.ggml_types import GgmlType, QuantizedTensor

from .audio import SAMPLE_RATE, load_audio, read_wav, resample
from .backend_compute import BackendAudioFeatures, BackendWhisper
from .compute import WhisperCompute
from .decoding import DecodingResult, GreedyDecoder, WindowDecoder, compression_ratio, initial_tokens
from .errors import SettingLimitError, WhisperError
from .language import detect_language
from .loader import load_model_data
from .logit_filters import LogitRules
from .mel import N_FRAMES, N_SAMPLES, log_mel_spectrogram, mel_filters, mel_windows
from .model import Whisper
from .model_data import SpecialTokens, WhisperHParams, WhisperModelData
from .options import DecodingOptions
from .speech_gate import VadParameters
from .streaming import Stream, StreamFinishedError
from .tokenizer import Tokenizer
from .transcribe import transcribe
from .transcript import Segment, Transcript, Word

__all__ = [
    "BackendAudioFeatures",
    "BackendWhisper",
    "DecodingOptions",
    "DecodingResult",
    "GgmlType",
    "GreedyDecoder",
    "LogitRules",
    "N_FRAMES",
    "N_SAMPLES",
    "QuantizedTensor",
    "SAMPLE_RATE",
    "Segment",
    "SpecialTokens",
    "Stream",
    "StreamFinishedError",
    "Tokenizer",
    "Transcript",
    "VadParameters",
    "Whisper",
    "WhisperCompute",
    "SettingLimitError",
    "WhisperError",
    "WhisperHParams",
    "WhisperModelData",
    "WindowDecoder",
    "Word",
    "compression_ratio",
    "detect_language",
    "initial_tokens",
    "load_audio",
    "load_model_data",
    "log_mel_spectrogram",
    "mel_filters",
    "mel_windows",
    "read_wav",
    "resample",
    "transcribe",
]
