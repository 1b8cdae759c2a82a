"""Digit scenes with captions and questions: image-text pairs for a vision-and-language model.

A scene is a 16x16 canvas cut into four 8x8 cells, with two of scikit-learn's 8x8 digits in two
cells side by side (same row) or one above the other (same column). The image stream gets one
region per digit, as an object detector would give it: the digit's 64 pixels and its box. The
text stream gets a caption that says where the two digits are, or a question about them:

    "a seven left of a two"      "a two right of a seven"       (side by side)
    "a seven above a two"        "a two below a seven"          (stacked)
    "what is left of the two ?"  -> seven

Shapes: N scenes, R = 2 regions per scene, F = 64 pixels per region, T tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyformer.data.mlm import pad_batch

__all__ = [
    "DIGIT_WORDS", "SPECIAL_IDS", "VOCAB", "Scenes", "caption_text", "encode", "make_scenes",
    "mask_regions", "questions",
]  # fmt: skip

DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
VOCAB = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "a", "of", "left", "right", "above", "below",
         "what", "is", "the", "?", *DIGIT_WORDS]  # fmt: skip
PAD, CLS, SEP, MASK = 0, 1, 2, 3
SPECIAL_IDS = (PAD, CLS, SEP)
CELL = 8  # pixels per cell side; the canvas is 2 x 2 cells
# (first cell, second cell) of each placement: first is left of / above second. Cells: 0 1 / 2 3.
PAIRS = {"row": [(0, 1), (2, 3)], "column": [(0, 2), (1, 3)]}


@dataclass
class Scenes:
    canvas: np.ndarray  # (N, 1, 16, 16) in [0, 1]: the picture, for plots
    regions: np.ndarray  # (N, R, F): each digit's pixels, the first (left or top) digit first
    boxes: np.ndarray  # (N, R, 5): x1, y1, x2, y2, area, as fractions of the canvas
    labels: np.ndarray  # (N, R) int64: each region's digit
    stacked: np.ndarray  # (N,) bool: one above the other (else side by side)
    swap: np.ndarray  # (N,) bool: the caption names the second digit first

    def __len__(self) -> int:
        return len(self.labels)


def make_scenes(images: np.ndarray, labels: np.ndarray, n: int, rng: np.random.Generator) -> Scenes:
    """`n` scenes of two digits drawn (with replacement) from images (M, 1, 8, 8) and their
    labels (M,); placement and caption order are drawn from `rng`."""
    if images.ndim != 4 or images.shape[1:] != (1, CELL, CELL) or len(images) != len(labels):
        raise ValueError(f"make_scenes: images must be (M, 1, 8, 8) with M labels, got "
                         f"{images.shape} and {len(labels)} labels")  # fmt: skip
    picks = rng.integers(0, len(images), size=(n, 2))
    stacked = rng.random(n) < 0.5
    which = rng.integers(0, 2, size=n)  # which row (side by side) or column (stacked)
    swap = rng.random(n) < 0.5
    canvas = np.zeros((n, 1, 2 * CELL, 2 * CELL), np.float32)
    boxes = np.zeros((n, 2, 5), np.float32)
    for i in range(n):
        cells = PAIRS["column" if stacked[i] else "row"][which[i]]
        for r, cell in enumerate(cells):
            y, x = divmod(cell, 2)
            canvas[i, 0, y * CELL : (y + 1) * CELL, x * CELL : (x + 1) * CELL] = images[
                picks[i, r], 0
            ]
            boxes[i, r] = (x / 2, y / 2, (x + 1) / 2, (y + 1) / 2, 0.25)
    regions = images[picks].reshape(n, 2, CELL * CELL)  # (N, R, F)
    return Scenes(canvas, regions, boxes, labels[picks].astype(np.int64), stacked, swap)


def caption_text(scenes: Scenes, i: int) -> str:
    """The caption of scene i: where its two digits are."""
    first, second = (DIGIT_WORDS[d] for d in scenes.labels[i])
    before, after = ("above", "below") if scenes.stacked[i] else ("left of", "right of")
    if scenes.swap[i]:
        return f"a {second} {after} a {first}"
    return f"a {first} {before} a {second}"


def questions(scenes: Scenes) -> tuple[list[str], np.ndarray]:
    """One question per scene about the digit on one side of the other, and its answer (N,):
    "what is left of the two ?" -> the digit left of the two. `swap` picks which digit is
    asked about."""
    texts, answers = [], np.zeros(len(scenes), np.int64)
    for i in range(len(scenes)):
        first, second = scenes.labels[i]
        before, after = ("above", "below") if scenes.stacked[i] else ("left of", "right of")
        if scenes.swap[i]:  # ask about the first: the answer is the second
            texts.append(f"what is {after} the {DIGIT_WORDS[first]} ?")
            answers[i] = second
        else:
            texts.append(f"what is {before} the {DIGIT_WORDS[second]} ?")
            answers[i] = first
    return texts, answers


def encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Texts -> ids (N, T) as [CLS] words [SEP], padded, and their attention mask (N, T)."""
    index = {w: i for i, w in enumerate(VOCAB)}
    unknown = sorted({w for t in texts for w in t.split() if w not in index})
    if unknown:
        raise ValueError(f"encode: words not in the vocabulary: {unknown}")
    return pad_batch([[CLS, *(index[w] for w in t.split()), SEP] for t in texts], PAD)


def mask_regions(
    regions: np.ndarray, labels: np.ndarray, rng: np.random.Generator, p: float = 0.15
) -> tuple[np.ndarray, np.ndarray]:
    """ViLBERT's region masking: each region is chosen with probability p; 90% of the chosen
    have their features zeroed, 10% are left as they are. -> (regions (N, R, F), targets
    (N, R): the digit at chosen regions, -100 elsewhere)."""
    chosen = rng.random(labels.shape) < p
    zeroed = chosen & (rng.random(labels.shape) < 0.9)
    return np.where(zeroed[..., None], 0.0, regions).astype(regions.dtype), np.where(
        chosen, labels, -100
    )
