r"""Balanced random-effects designs, crossed and nested, and their expected mean squares.

A design names its facets by single letters and says which are nested in which,
in the notation of generalizability theory (Brennan 2001, ch. 3; paper
``ask-which-not-how-good``, section 3 and appendix):

- ``"s x i x j x r:sij"``: systems, items and judges crossed, replicates nested
  in each system-item-judge cell;
- ``"(g:i) x j"``: generations nested in items (scenarios), crossed with judges
  (the CyclicJudge model, ``cyclicjudge`` section 3);
- ``"(c:m) x i x j"``: configurations nested in models, crossed with items and
  judges.

Effects
    An effect is a non-empty set of facets that is closed under nesting (a
    facet's nests are in the set whenever the facet is). Its *primary* facets
    are the members no other member is nested in; the rest are its nesting
    facets, so ``{r, s, i, j}`` is written ``r:sij`` and ``{g, i, j}`` ``gj:i``.
    The set of all facets is the residual (confounded with error).

Sums of squares
    For balanced data the averaging operators :math:`A_T` (mean over the facets
    outside ``T``) commute, and the projection onto effect ``S`` is the Möbius
    inversion over the lattice of closed sets,
    :math:`P_S = \sum_{U \subseteq R(S)} (-1)^{|U|} A_{S \setminus U}`, with
    :math:`R(S)` the primary facets of ``S``. Then :math:`SS_S = \lVert P_S x \rVert^2`
    and :math:`df_S = \prod_{f \in R(S)} (n_f - 1) \prod_{f \in S \setminus R(S)} n_f`.

Expected mean squares (all facets random, infinite universes)
    :math:`E[MS_S] = \sum_{T \supseteq S} \sigma^2_T \, N / \prod_{f \in T} n_f`
    (Cornfield and Tukey 1956; Brennan 2001, eq. 3.27), so the matrix of
    coefficients is triangular and the components solve one linear system. No
    design is written out by hand.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from jurymeter.errors import DesignError

Effect = frozenset[str]

_TERM = re.compile(r"^\(?([a-z])(?::([a-z]+))?\)?$")


@dataclass(frozen=True)
class Design:
    """Facets in axis order and, for each facet, the facets it is nested in.

    Build one with :meth:`parse`. ``nests`` is transitively closed.
    """

    facets: tuple[str, ...]
    nests: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str) -> Design:
        """Read a design such as ``"s x i x j x r:sij"`` or ``"(c:m) x i x j"``.

        >>> Design.parse("(g:i) x j").facets
        ('i', 'g', 'j')
        """
        order: list[str] = []
        nests: dict[str, set[str]] = {}
        declared: set[str] = set()
        terms = [t.strip() for t in re.split(r"\s+x\s+|\s*×\s*", spec.strip()) if t.strip()]
        if not terms:
            msg = f"design {spec!r} names no facet"
            raise DesignError(msg)
        for term in terms:
            match = _TERM.match(term.replace(" ", ""))
            if match is None:
                msg = (
                    f"design {spec!r}: cannot read term {term!r}; write facets as single "
                    "letters, crossed with ' x ', nested with ':' (e.g. 'r:sij', '(g:i)')"
                )
                raise DesignError(msg)
            primary, nest = match.group(1), match.group(2) or ""
            if primary in declared:
                msg = f"design {spec!r} declares facet {primary!r} twice"
                raise DesignError(msg)
            declared.add(primary)
            for letter in nest + primary:
                if letter not in order:
                    order.append(letter)
            for letter in primary:
                nests.setdefault(letter, set()).update(nest)
        for letter in order:
            nests.setdefault(letter, set())
        # Transitive closure: nested in a facet that is itself nested.
        changed = True
        while changed:
            changed = False
            for inside in nests.values():
                extra = set().union(*(nests[n] for n in inside)) - inside if inside else set()
                if extra:
                    inside |= extra
                    changed = True
        for letter, inside in nests.items():
            if letter in inside:
                msg = f"design {spec!r}: facet {letter!r} is nested in itself"
                raise DesignError(msg)
        if len(order) != len(set(order)):
            msg = f"design {spec!r} repeats a facet"
            raise DesignError(msg)
        return cls(tuple(order), {k: frozenset(v) for k, v in nests.items()})

    # ------------------------------------------------------------ effects
    @cached_property
    def effects(self) -> tuple[Effect, ...]:
        """All effects, by size and then axis order; the last is the residual."""
        found = []
        for size in range(1, len(self.facets) + 1):
            for combo in itertools.combinations(self.facets, size):
                members = frozenset(combo)
                if all(self.nests[f] <= members for f in members):
                    found.append(members)
        return tuple(found)

    def primary(self, effect: Effect) -> frozenset[str]:
        """Members of ``effect`` that no other member is nested in."""
        return frozenset(f for f in effect if not any(f in self.nests[g] for g in effect))

    def label(self, effect: Effect) -> str:
        """Conventional name: ``"sj"``, ``"r:sij"``, ``"gj:i"``."""
        primary = self.primary(effect)
        first = "".join(f for f in self.facets if f in primary)
        rest = "".join(f for f in self.facets if f in effect and f not in primary)
        return f"{first}:{rest}" if rest else first

    def effect(self, label: str) -> Effect:
        """The effect with a given label (inverse of :meth:`label`)."""
        for effect in self.effects:
            if self.label(effect) == label:
                return effect
        msg = f"design has no effect {label!r}; its effects are {self.labels}"
        raise DesignError(msg)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.label(e) for e in self.effects)

    def lme4_formula(self, response: str = "score") -> str:
        """The equivalent ``lmer`` formula: one random intercept per effect but the residual.

        Nested facets need level labels unique within their nest (``m:c``).

        >>> Design.parse("(g:i) x j").lme4_formula()
        'score ~ 1 + (1|i) + (1|j) + (1|i:g) + (1|i:j)'
        """
        residual = self.effects[-1]
        terms = [
            "(1|" + ":".join(f for f in self.facets if f in effect) + ")"
            for effect in self.effects
            if effect != residual
        ]
        return f"{response} ~ 1 + " + " + ".join(terms)

    # ------------------------------------------------------------ counts
    def check_sizes(self, sizes: Mapping[str, int]) -> None:
        for facet in self.facets:
            n = sizes.get(facet)
            if n is None or int(n) != n or n < 1:
                msg = f"facet {facet!r} needs a size >= 1, got {n!r}"
                raise DesignError(msg)

    def df(self, effect: Effect, sizes: Mapping[str, int]) -> int:
        """Degrees of freedom of an effect."""
        primary = self.primary(effect)
        out = 1
        for f in effect:
            out *= (sizes[f] - 1) if f in primary else sizes[f]
        return out

    def ems_matrix(self, sizes: Mapping[str, int]) -> np.ndarray:
        """Coefficients ``C`` with ``E[MS] = C @ sigma2``, rows and columns in :attr:`effects` order."""
        self.check_sizes(sizes)
        total = float(np.prod([sizes[f] for f in self.facets]))
        k = len(self.effects)
        matrix = np.zeros((k, k))
        for row, s in enumerate(self.effects):
            for col, t in enumerate(self.effects):
                if s <= t:
                    matrix[row, col] = total / np.prod([sizes[f] for f in t])
        return matrix
