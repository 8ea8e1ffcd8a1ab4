"""Data files the upstream scripts read, synthesized (nothing here downloads).

Each synthesizer writes into the project folder what the script expects at its
defaults, in the shape the upstream data has, and returns one line saying what it
wrote (the runner prints it).
"""

from __future__ import annotations

import random
from pathlib import Path


def _lines(rng: random.Random, count: int, vocabulary: list[str], cumulative: list[float]) -> str:
    lines, written = [], 0
    while written < count:
        n = rng.randint(5, 30)
        lines.append(" " + " ".join(rng.choices(vocabulary, cum_weights=cumulative, k=n)) + " ")
        written += n
    return "\n".join(lines) + "\n"


def _zipf(words: int) -> tuple[list[str], list[float]]:
    vocabulary = [f"w{i}" for i in range(words)]
    cumulative, total = [], 0.0
    for rank in range(words):
        total += 1.0 / (rank + 1)
        cumulative.append(total)
    return vocabulary, cumulative


def wikitext2(folder: Path, tokens: int = 100_000) -> str:
    """``data/wikitext-2/{train,valid,test}.txt``: lines of words drawn from a Zipf-like
    vocabulary of 5,000 words (WikiText-2 has 2M training tokens and 33k words)."""
    rng = random.Random(17)
    vocabulary, cumulative = _zipf(5000)
    target = folder / "data" / "wikitext-2"
    target.mkdir(parents=True, exist_ok=True)
    for name, count in (("train", tokens), ("valid", tokens // 10), ("test", tokens // 10)):
        (target / f"{name}.txt").write_text(_lines(rng, count, vocabulary, cumulative), encoding="utf8")
    return f"data/wikitext-2: {tokens} / {tokens // 10} / {tokens // 10} tokens, 5000 words"


def penn_treebank(folder: Path, tokens: int = 60_000) -> str:
    """``data/train.txt`` as the tutorial reads it (Penn Treebank: 930k tokens, 10k words)."""
    rng = random.Random(23)
    vocabulary, cumulative = _zipf(3000)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "train.txt").write_text(_lines(rng, tokens, vocabulary, cumulative), encoding="utf8")
    return f"data/train.txt: {tokens} tokens, 3000 words"


def shakespeare_char(folder: Path, characters: int = 1_003_854) -> str:
    """``data/shakespeare_char/{train,val}.bin`` (uint16 ids, 90/10 split) and ``meta.pkl``
    as nanoGPT's prepare.py writes them, over a 65-character vocabulary."""
    import pickle

    import numpy as np

    rng = np.random.default_rng(5)
    chars = [chr(c) for c in range(32, 97)]
    target = folder / "data" / "shakespeare_char"
    target.mkdir(parents=True, exist_ok=True)
    ids = rng.integers(0, len(chars), size=characters, dtype=np.uint16)
    split = int(characters * 0.9)
    ids[:split].tofile(target / "train.bin")
    ids[split:].tofile(target / "val.bin")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}
    with open(target / "meta.pkl", "wb") as handle:
        pickle.dump(meta, handle)
    return f"data/shakespeare_char: {split} / {characters - split} characters, 65 symbols"


def tiny_shakespeare(folder: Path, characters: int = 200_000) -> str:
    """``input.txt`` as the lecture's ``wget`` of char-rnn's tinyshakespeare leaves it
    (1.1M characters of 65 symbols): lines of words over the same alphabet."""
    rng = random.Random(29)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(1, 8))) for _ in range(3000)]
    vocabulary, cumulative = words, _zipf(len(words))[1]
    lines, size = [], 0
    while size < characters:
        line = " ".join(rng.choices(vocabulary, cum_weights=cumulative, k=rng.randint(3, 12)))
        line = line[:1].upper() + line[1:] + rng.choice(".,;:!?")
        lines.append(line)
        size += len(line) + 1
    (folder / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"input.txt: {size} characters"


SYNTHESIZERS = {"wikitext2": wikitext2, "penn_treebank": penn_treebank, "shakespeare_char": shakespeare_char,
                "tiny_shakespeare": tiny_shakespeare}
