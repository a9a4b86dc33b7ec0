"""The paper's claims: each verdict is the paired test's on the rows' per-query AP averaged over their seeds."""
import numpy as np
import pytest

from ticketsim.evaluate.report import BLOCK, table5
from ticketsim.training.claims import ALPHA, CLAIMS, Claim, claims_report, judged
from ticketsim.training.selection import paired_test

QUERIES = [f"Q{i:03d}" for i in range(30)]


def seeded(method: str, ap_by_seed: dict[int, np.ndarray]) -> dict:
    """A row's results file over seeds as the siamese stage writes it, with each seed's AP of each dev query."""
    runs = [{"seed": seed, method: {"dev": {"rerank": {"map": float(ap.mean())}}},
             "query_ap": {"dev": [[q, float(a)] for q, a in zip(QUERIES, ap)]}} for seed, ap in ap_by_seed.items()]
    return {method: {"dev": {"rerank": {"map": float(np.mean([run[method]["dev"]["rerank"]["map"] for run in runs]))}}},
            "sd": {method: {"dev": {"rerank": {"map": 0.0}}}}, "seeds": runs, BLOCK: "the paper"}


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[int, np.ndarray]]:
    rng = np.random.default_rng(7)
    base = rng.uniform(0.3, 0.9, len(QUERIES))
    noise = lambda: rng.normal(0, 0.02, len(QUERIES))  # noqa: E731
    row21 = {13: base + noise(), 14: base + noise()}
    swing = np.resize([0.05, -0.05], len(QUERIES))      # #20: as often above #21 as below, by as much
    return {"#22": {13: base + 0.08 + noise(), 14: base + 0.06 + noise()},    # above #21 on every query
            "#21": row21,
            "#18": {13: base + 0.1 + noise(), 14: base + 0.12 + noise()},     # above both: the claims on it fail
            "#20": {seed: ap + swing for seed, ap in row21.items()}}


def test_each_verdict_is_the_paired_test_of_the_seed_averaged_query_ap(rows):
    table = table5([seeded(method, by_seed) for method, by_seed in rows.items()])
    verdicts = judged(table.seeds, n=2000)
    assert sorted(verdicts) == sorted(c.key for c in CLAIMS if c.better in rows and c.worse in rows)
    for claim in (c for c in CLAIMS if c.key in verdicts):
        averaged = [{q: float(np.mean([ap[i] for ap in rows[m].values()])) for i, q in enumerate(QUERIES)}
                    for m in (claim.better, claim.worse)]
        test = paired_test(*averaged, n=2000, seed=0)
        verdict = verdicts[claim.key]
        assert verdict["mean_difference"] == pytest.approx(test["mean_difference"]) and verdict["p"] == test["p"]
        significant = test["p"] < ALPHA
        assert verdict["verdict"] == ("held" if test["mean_difference"] > 0 else "reversed") if significant else "not shown"
        assert verdict["held"] == (verdict["verdict"] == "held")
    assert (verdicts["22 over 21"]["verdict"], verdicts["22 over 18"]["verdict"], verdicts["21 over 18"]["verdict"]) == \
        ("held", "reversed", "reversed")
    assert verdicts["21 over 20"]["verdict"] == "not shown"     # noise around the same AP
    report = claims_report(table, verdicts)
    assert "| #22 > #21 |" in report and "**held**" in report and "**reversed**" in report
    assert "| #22 | " in report.split("## Each seed")[1]     # each seed's figure beside the claims


def test_a_claim_needs_both_rows():
    assert judged({"#22": []}, claims=[Claim("#22", "#21", "T")]) == {}
