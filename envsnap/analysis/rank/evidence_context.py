"""What a difference kind reads when it adds its evidence terms to a cause's score (`evidence`): the facts gathered
over every difference of the comparison (rank/domain.py), the knowledge table's rule for the difference, and the
runs' mechanism."""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

from envsnap.analysis import knowledge
from envsnap.analysis.rank.domain import Facts


class EvidenceContext(NamedTuple):
    facts: Facts
    rule: knowledge.FieldRule
    mechanism: Optional[Mapping[str, Any]] = None
