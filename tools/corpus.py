"""Write the training corpus of chapter 14: short stories and songs from a seeded grammar.

The text is the project's own: this grammar generates every line of it, from
word lists written for the purpose, with a fixed seed. It is published under
the same licence as the site's prose, Creative Commons Attribution 4.0.

Two kinds of lines, one a line:

- **stories**: a few short sentences about two people, a thing, a colour and
  a place, all chosen at random for the story and named again and again in
  it. Which names come back is known only from earlier in the same story;
- **songs**: a line of random words, sung two or three times. After the
  first time, the rest of the song can be read off what came before.

The names are invented, so no count of word pairs over the whole corpus can
tell which one comes next: only the story itself can. The grammar writes
"a" and never "an": every word that can follow "a" (a colour, an animal)
starts with a consonant, which ``tests/test_training_run.py`` checks. Words and punctuation
are separated by spaces, so ``text.split()`` gives the tokens, as in
chapter 5.

    python tools/corpus.py            # rewrites docs/training/corpus.txt
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "docs" / "training" / "corpus.txt"
SEED = 14
N_LINES = 4000
SONG_SHARE = 0.5       # half the lines are songs: repeats to learn from

NAMES = (
    "ama", "bex", "cato", "dru", "elo", "fenn", "gil", "hoppa", "isk", "jory", "kel",
    "lumo", "mira", "nox", "oona", "pell", "quill", "rook", "sela", "tam", "ulo",
    "vesk", "wim", "zara",
)
THINGS = (
    "kite", "boat", "drum", "hat", "lamp", "key", "map", "cup", "ball", "book", "box",
    "bell", "coat", "shell", "stone", "flute",
)
ANIMALS = (
    "cat", "dog", "fox", "pig", "hen", "goat", "frog", "bee",
)
COLOURS = (
    "red", "blue", "green", "black", "white", "yellow", "brown", "grey",
)
PLACES = (
    "park", "river", "hill", "market", "garden", "forest", "beach", "village", "bridge",
    "mill",
)
ADJECTIVES = (
    "old", "small", "big", "new", "warm", "quiet",
)

# {a}, {b}: the story's two people; {t}: its thing; {c}: the thing's colour;
# {p}: a place; {n}: an animal; {j}: an adjective.
OPENINGS = (
    "{a} had a {c} {t} .",
    "{a} made a {c} {t} for {b} .",
    "one day {a} found a {c} {t} .",
)
MIDDLES = (
    "{a} and {b} went to the {p} .",
    "at the {p} , {a} saw a {n} .",
    "the {n} was {j} .",
    "{b} wanted the {c} {t} .",
    "{a} gave the {t} to {b} .",
    "{b} said : thank you , {a} .",
    "{a} lost the {t} at the {p} .",
    "{b} found the {t} near the {n} .",
    "the {t} was {c} and {j} .",
    "{a} said : where is my {t} ?",
    "{b} took the {t} to the {p} .",
    "the {n} liked the {c} {t} .",
)
ENDINGS = (
    "then {a} and {b} went home .",
    "{b} kept the {t} .",
    "and the {t} stayed at the {p} .",
)
SONG_WORDS = THINGS + ANIMALS + COLOURS + PLACES + ADJECTIVES


def story(rng: np.random.Generator) -> str:
    a, b = rng.choice(NAMES, size=2, replace=False)
    slots = {
        "a": a, "b": b, "t": rng.choice(THINGS), "c": rng.choice(COLOURS),
        "p": rng.choice(PLACES), "n": rng.choice(ANIMALS), "j": rng.choice(ADJECTIVES),
    }
    n_middle = rng.integers(2, 6)
    middle = rng.choice(MIDDLES, size=n_middle, replace=False)
    sentences = [rng.choice(OPENINGS), *middle, rng.choice(ENDINGS)]
    return " ".join(sentence.format(**slots) for sentence in sentences)


def song(rng: np.random.Generator) -> str:
    singer = rng.choice(NAMES)
    words = " ".join(rng.choice(SONG_WORDS, size=rng.integers(4, 11)))
    times = rng.integers(2, 4)
    verses = [f"{singer} sang : {words} ."]
    verses += [f"and again : {words} ."] * (times - 1)
    return " ".join(verses)


# Where the eight words of each verse sit in a measuring song's token losses
# (index i is the loss of guessing token i + 1): name sang : w1 ... w8 . and again : w1 ... w8 .
FIRST_VERSE, SECOND_VERSE = slice(2, 10), slice(14, 22)


def measuring_song(rng: np.random.Generator) -> list[str]:
    """A song for measuring a model: eight random words, sung twice, as tokens."""
    words = " ".join(rng.choice(SONG_WORDS, size=8))
    return f"{rng.choice(NAMES)} sang : {words} . and again : {words} .".split()


def evaluation_texts(held_out: np.ndarray, vocab: list[str], seed: int = 2022):
    """What chapter 14's run is measured on: 256 held-out windows of 65 tokens, and 200 measuring songs."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(held_out) - 65, size=256)
    windows = held_out[starts[:, None] + np.arange(65)]
    index = {word: i for i, word in enumerate(vocab)}
    songs = np.array([[index[word] for word in measuring_song(rng)] for _ in range(200)])
    return windows, songs


def corpus(n_lines: int = N_LINES, seed: int = SEED) -> str:
    """The corpus as one string, a story or a song a line, with its header."""
    rng = np.random.default_rng(seed)
    header = (
        "# The training corpus of chapter 14 (Lookups learned from text).\n"
        "# Generated by tools/corpus.py from a seeded grammar of the project's own; "
        "no line is taken from elsewhere.\n"
        "# Licence: Creative Commons Attribution 4.0 (CC BY 4.0), like the site's prose.\n"
        "# Lines starting with # are not part of the text.\n"
    )
    lines = [song(rng) if rng.random() < SONG_SHARE else story(rng) for _ in range(n_lines)]
    return header + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=CORPUS)
    args = parser.parse_args()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(corpus())
    print(f"wrote {args.output} ({args.output.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
