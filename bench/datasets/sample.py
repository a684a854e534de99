"""``--limit N``: a seeded sample of N cases, stratified by what the cases expect.

Datasets are written tool by tool (the first 17 ecommerce cases all expect ``search_orders``),
so the first N cases would test one tool. The sample instead takes cases from every stratum
(each expected tool, cases calling several tools, no-call cases, ask cases) in proportion to
its size (Sainte-Laguë's highest-averages rule, which also spreads the first picks over the
largest strata), each stratum's cases in a seeded random order. The sample is:

- deterministic: the same cases and seed give the same sample on every machine and Python;
- nested: the sample of N is part of the sample of N + 1 (``--limit 20`` extends ``--limit 5``);
- in the dataset's order: the chosen cases keep their file order.
"""

from __future__ import annotations

import hashlib
import random
from fractions import Fraction
from typing import Sequence

from bench.models import Case

NO_CALL, ASK, SEVERAL = "(no call)", "(ask)", "(several tools)"


def stratum(case: Case) -> str:
    """The stratum of a case: ``(no call)``, ``(ask)``, the one tool its expected calls name
    (one or more calls of that tool), or ``(several tools)``."""
    if case.expected.no_call:
        return NO_CALL
    if case.expected.ask:
        return ASK
    names = {call.name for call in case.expected.calls}
    return names.pop() if len(names) == 1 else SEVERAL


def _digest(seed: int, text: str) -> str:
    return hashlib.sha256(f"{seed}/{text}".encode("utf-8")).hexdigest()


def stratified_order(cases: Sequence[Case], seed: int) -> list[Case]:
    """Every case, in the order the sample takes them (its first N are the sample of N).

    Each next case comes from the stratum with the highest ``size / (2 * taken + 1)`` (ties:
    a seeded order of the strata), and within a stratum in a seeded random order.

    Args:
        cases: the cases to order (unique ids).
        seed: the run's ``--seed``.

    Returns:
        The same cases, reordered.
    """
    members: dict[str, list[Case]] = {}
    for case in cases:
        members.setdefault(stratum(case), []).append(case)
    for name, group in members.items():
        # a string seed hashes with SHA-512 in Python's random: stable across processes
        random.Random(_digest(seed, name)).shuffle(group)
    rank = {name: i for i, name in enumerate(sorted(members, key=lambda n: _digest(seed, n)))}
    taken = {name: 0 for name in members}
    order: list[Case] = []
    while len(order) < len(cases):
        name = max((n for n in members if taken[n] < len(members[n])),
                   key=lambda n: (Fraction(len(members[n]), 2 * taken[n] + 1), -rank[n]))
        order.append(members[name][taken[name]])
        taken[name] += 1
    return order


def stratified_sample(cases: Sequence[Case], n: int, seed: int) -> list[Case]:
    """``n`` cases (all when ``n`` >= their number) of :func:`stratified_order`, in the order
    of ``cases``.

    Args:
        cases: the cases to sample from, in dataset order.
        n: how many to take (>= 1).
        seed: the run's ``--seed``.
    """
    chosen = {case.id for case in stratified_order(cases, seed)[:n]}
    return [case for case in cases if case.id in chosen]
