"""What ``bench synth`` is asked (:class:`SynthSettings`), what it asks the generator
(:class:`Request`) and what comes back (:class:`Candidate`), with the verification's
rejection reasons (:data:`REASONS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.synth.proposals import KINDS

#: Rejection reasons, in the order the checks run.
REASONS = ("format", "language", "kind", "schema", "duplicate", "leak", "execution",
           "unsolvable")
#: Masked n-gram Jaccard similarity at or above which two queries are near-duplicates. Every
#: one of the 687 hand-written single-answer cases of the shipped datasets has its nearest
#: other case below 0.64 under this measure (ecommerce 0.571, analytics 0.545, logistics
#: 0.636), so 0.7 keeps all of them apart while catching a rewording that changes only ids,
#: numbers or a word or two.
DUPLICATE_THRESHOLD = 0.7
DEFAULT_MIN_AGREE = 2


@dataclass(frozen=True)
class SynthSettings:
    """What ``bench synth`` was asked.

    Attributes:
        toolset: the toolset to write cases for.
        generator: the provider id that proposes cases.
        solvers: provider ids whose answers must agree with each label.
        dataset: the dataset folder name under ``datasets/`` that receives kept cases.
        kinds: kinds to ask for (:data:`bench.synth.proposals.KINDS`).
        languages: languages (``en``, ``zh``, ``mixed``).
        count: requests per kind and language.
        variant: the variant shown to the generator and the solvers (None: ``l50`` when the
            toolset has it, else its first variant).
        distractors: every second ``single`` request asks for a distractor phrasing that
            names a similar tool.
        templates: a folder of prompt templates overriding the built-ins.
        seed: the generator's and solvers' base seed.
        solver_trials: answers per solver (the same provider with another seed counts as an
            independent answer, except ``local``, which decodes greedily: its trials count once).
        min_agree: answers that must agree with a label, >= 1 (default 2).
        execute: run the label's calls on the toolset's executor.
        allow_writes: let the executor run write tools; ``allow_sensitive`` sensitive ones.
        duplicate_threshold: :data:`DUPLICATE_THRESHOLD` unless changed.
        model: the ``local`` preset for a ``local`` generator or solver (None: default).
        max_tokens: the generator's completion cap.
    """

    toolset: str
    generator: str
    solvers: tuple[str, ...]
    dataset: str
    kinds: tuple[str, ...] = KINDS
    languages: tuple[str, ...] = ("en",)
    count: int = 2
    variant: str | None = None
    distractors: bool = False
    templates: Path | None = None
    seed: int = 1234
    solver_trials: int = 1
    min_agree: int = DEFAULT_MIN_AGREE
    execute: bool = True
    allow_writes: bool = False
    allow_sensitive: bool = False
    duplicate_threshold: float = DUPLICATE_THRESHOLD
    model: str | None = None
    max_tokens: int = 1024


@dataclass
class Candidate:
    """One proposal and what verification said of it.

    ``case`` is the case object as written (None when the answer held no usable proposal);
    ``verdicts`` maps each check that ran to ``pass``, ``fail: <why>`` or ``skipped: <why>``;
    ``reason`` is the first failed check (None: kept).
    """

    id: str
    kind: str
    lang: str
    request: str
    query: str | None
    case: dict[str, Any] | None
    verdicts: dict[str, str] = field(default_factory=dict)
    reason: str | None = None

    def fail(self, check: str, why: str) -> None:
        """Record the failed ``check`` (the rejection reason) and why."""
        self.verdicts[check] = f"fail: {why}"
        self.reason = check


@dataclass(frozen=True)
class Request:
    """One generation request: its id, kind, language, focus tool and rendered prompt."""

    id: str
    kind: str
    lang: str
    tool: str
    template: str
    template_sha256: str
    text: str
    prompt_sha256: str
    distractor: bool = False


def stamp() -> str:
    """A new run id (:func:`bench.store.new_run_id`) for the name of a scratch run."""
    from bench.store import new_run_id
    return new_run_id()
