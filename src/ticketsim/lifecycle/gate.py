"""The retraining quality gate: a candidate model's metrics against the champion's, metric by metric, as a verdict and a
Markdown table. Pure logic: ticketsim.lifecycle.promotion gets the metrics (both models scored on the trusted pairs of
ticketsim.lifecycle.trusted; without a champion, the first model's stored figures, with nothing to compare them with).
"""
from __future__ import annotations

from dataclasses import dataclass

from ticketsim.config import GateRule

EPSILON = 1e-12      # float noise: a metric that moved by exactly the tolerance still passes


@dataclass(frozen=True)
class MetricVerdict:
    metric: str
    champion: float | None
    candidate: float | None
    passed: bool
    verdict: str

    @property
    def delta(self) -> float | None:
        return None if self.champion is None or self.candidate is None else self.candidate - self.champion


@dataclass(frozen=True)
class GateResult:
    rows: tuple[MetricVerdict, ...]
    first_model: bool

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    def markdown(self, candidate: str, champion: str | None, basis: str | None = None) -> str:
        """The verdict, what was compared, on which pairs (`basis`), and the table: metric, champion, candidate, delta,
        verdict."""
        status = "passed" if self.passed else "FAILED"
        against = (f"{candidate} vs champion {champion}" if champion and not self.first_model
                   else f"{candidate}: no champion yet, so this is the first model")
        return "\n".join([f"### Quality gate {status}", "", against, "", *([basis, ""] if basis else []), self.table()])

    def table(self) -> str:
        lines = ["| metric | champion | candidate | delta | verdict |", "| --- | ---: | ---: | ---: | --- |"]
        lines += [f"| `{r.metric}` | {number(r.champion)} | {number(r.candidate)} | {number(r.delta, sign=True)} | {r.verdict} |"
                  for r in self.rows]
        return "\n".join(lines) + "\n"


def compare(champion: dict[str, float] | None, candidate: dict[str, float], rules: dict[str, GateRule]) -> GateResult:
    """Judge every metric of `rules` (keys as in the metrics dicts); `champion` None: no champion yet, the gate passes."""
    rows = tuple(judge(metric, rule, None if champion is None else champion.get(metric), candidate.get(metric))
                 for metric, rule in rules.items())
    return GateResult(rows, first_model=champion is None)


def judge(metric: str, rule: GateRule, champion: float | None, candidate: float | None) -> MetricVerdict:
    if candidate is None:
        # not logged by its run, or not defined on these pairs (a correlation of constant scores)
        return MetricVerdict(metric, champion, candidate, False, "**missing**: the candidate has no such figure")
    if champion is None:
        return MetricVerdict(metric, champion, candidate, True, "new (nothing to compare)")
    gain = (candidate - champion) * (1 if rule.direction == "max" else -1)
    if gain > 0:
        return MetricVerdict(metric, champion, candidate, True, "better")
    if gain == 0:
        return MetricVerdict(metric, champion, candidate, True, "same")
    if gain >= -rule.tolerance - EPSILON:
        return MetricVerdict(metric, champion, candidate, True, f"worse, within tolerance {rule.tolerance:g}")
    return MetricVerdict(metric, champion, candidate, False, f"**worse** by more than {rule.tolerance:g}")


def number(value: float | None, sign: bool = False) -> str:
    return "–" if value is None else f"{value:+.4f}" if sign else f"{value:.4f}"
