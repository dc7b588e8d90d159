#!/usr/bin/env bash
# Generates the Whisper test audio and fetches the VAD's reference model into tests/assets/generated/
# (idempotent).
#
# Needs espeak-ng, sox, npm and python3 (with pip) on PATH; it installs nothing itself. CI installs:
#   apt-get install -y espeak-ng sox npm
# Files that already exist are kept, so a second run does nothing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${root}/tests/assets/generated"
mkdir -p "${out}"

for tool in espeak-ng sox npm tar; do
    if ! command -v "${tool}" >/dev/null 2>&1; then
        echo "fetch_test_assets: '${tool}' is not installed (apt-get install -y espeak-ng sox npm)" >&2
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
    echo "fetch_test_assets: wrote ${dest}"
}
speak door_light "Please open the door and turn on the light."
speak good_morning "Good morning. How are you today?"

# jfk.wav ships inside the npm package nodejs-whisper@0.3.1.
jfk="${out}/jfk.wav"
jfk_member="package/cpp/whisper.cpp/bindings/go/samples/jfk.wav"
jfk_sha256="59dfb9a4acb36fe2a2affc14bacbee2920ff435cb13cc314a08c13f66ba7860e"
if [[ ! -s "${jfk}" ]]; then
    (cd "${work}" && npm pack --silent nodejs-whisper@0.3.1 >/dev/null)
    tar -xzf "${work}/nodejs-whisper-0.3.1.tgz" -C "${work}" "${jfk_member}"
    echo "${jfk_sha256}  ${work}/${jfk_member}" | sha256sum --check --quiet
    mv "${work}/${jfk_member}" "${jfk}"
    echo "fetch_test_assets: wrote ${jfk}"
fi

# A 65 s passage of 12 espeak sentences with known start times (passage.json): long-form tests
# cross two 30 s windows with it.
if [[ ! -s "${out}/passage.wav" || ! -s "${out}/passage.json" ]]; then
    python3 "${root}/scripts/make_passage.py" "${out}/passage.wav" --sentences 12
fi

# The VAD tests' reference: silero_vad.onnx of the silero-vad 6.2.3 wheel (the v6.2 model, MIT), run
# by onnxruntime. The wheel is only downloaded and unpacked, not installed.
onnx="${out}/silero_vad.onnx"
onnx_sha256="1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"
if [[ ! -s "${onnx}" ]]; then
    python3 -m pip download --quiet --no-deps silero-vad==6.2.3 -d "${work}"
    python3 -m zipfile -e "${work}"/silero_vad-6.2.3-py3-none-any.whl "${work}/silero"
    echo "${onnx_sha256}  ${work}/silero/silero_vad/data/silero_vad.onnx" | sha256sum --check --quiet
    mv "${work}/silero/silero_vad/data/silero_vad.onnx" "${onnx}"
    echo "fetch_test_assets: wrote ${onnx}"
fi
