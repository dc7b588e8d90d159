"""Where the stream's words differ from the reference, sentence by sentence (error analysis).

    python benchmarks/streaming_errors.py ROWS.json PASSAGE.json [--offline]

ROWS.json: benchmarks/streaming.py --json output; PASSAGE.json: the passage's sentence list
(scripts/make_passage.py writes it next to the wav; --repeats 5 lists each copy's sentences).
Each row's committed text (or with --offline the offline text) is aligned word by word to the
reference by a minimum-edit dynamic programme over normalised spellings; every substitution,
deletion and insertion is printed with its sentence number and copy, then a count of errors per
sentence across copies (an error that recurs in every copy is the engine's, not the schedule's).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from metal_backend.whisper.local_agreement import word_key  # noqa: E402


def align(hyp: list[str], ref: list[str]) -> list[tuple[str, int | None, int | None]]:
    """Minimum-edit alignment: ops ('=', 'S', 'D', 'I') with hyp and ref indices."""
    n, m = len(hyp), len(ref)
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        cost[i][0] = i
    for j in range(m + 1):
        cost[0][j] = j
    for i in range(1, n + 1):
        row, prev = cost[i], cost[i - 1]
        for j in range(1, m + 1):
            row[j] = min(prev[j - 1] + (hyp[i - 1] != ref[j - 1]), prev[j] + 1, row[j - 1] + 1)
    ops = []
    i, j = n, m
    while i or j:
        if i and j and cost[i][j] == cost[i - 1][j - 1] + (hyp[i - 1] != ref[j - 1]):
            ops.append(("=" if hyp[i - 1] == ref[j - 1] else "S", i - 1, j - 1))
            i, j = i - 1, j - 1
        elif j and cost[i][j] == cost[i][j - 1] + 1:
            ops.append(("D", None, j - 1))
            j -= 1
        else:
            ops.append(("I", i - 1, None))
            i -= 1
    return ops[::-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rows", type=Path)
    p.add_argument("passage", type=Path)
    p.add_argument("--offline", action="store_true")
    args = p.parse_args(argv)
    sentences = json.loads(args.passage.read_text())["sentences"]
    distinct = list(dict.fromkeys(s["text"] for s in sentences))
    ref, where = [], []
    seen: Counter = Counter()
    for s in sentences:
        copy = seen[s["text"]]
        seen[s["text"]] += 1
        for w in s["text"].split():
            if word_key(w):
                ref.append(word_key(w))
                where.append((distinct.index(s["text"]), copy))
    for row in json.loads(args.rows.read_text())["rows"]:
        text = row["offline_text" if args.offline else "text"]
        hyp = [word_key(w) for w in text.split() if word_key(w)]
        ops = align(hyp, ref)
        errors = [op for op in ops if op[0] != "="]
        print(f"## {row['engine']} {row['model']} {row['clock']} {row['audio_s']} s: {len(errors)} errors "
              f"/ {len(ref)} words ({100 * len(errors) / len(ref):.2f} %)")
        per_sentence: Counter = Counter()
        last = (0, 0)
        for k, (op, i, j) in enumerate(ops):
            if j is not None:
                last = where[j]
            if op == "=":
                continue
            sentence, copy = last
            per_sentence[sentence] += 1
            context = " ".join(hyp[max(0, (i if i is not None else 0) - 3):(i if i is not None else 0) + 4])
            print(f"  s{sentence:02d} copy {copy}: {op} ref={ref[j] if j is not None else '-'} "
                  f"hyp={hyp[i] if i is not None else '-'}   [{context}]")
        for sentence, count in sorted(per_sentence.items()):
            print(f"  sentence {sentence:02d} ({count} errors): {distinct[sentence][:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
