"""Shared fixtures: the SemEval-2016 Task 3 files live in ../shared beside the repo, never in it."""
from pathlib import Path

import pytest

SEMEVAL_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "semeval2016-task3"


@pytest.fixture(scope="session")
def semeval_dir() -> Path:
    if not (SEMEVAL_DIR / "SemEval2016-Task3-CQA-QL-dev.xml").is_file():
        pytest.skip(f"SemEval-2016 Task 3 files not found in {SEMEVAL_DIR}")
    return SEMEVAL_DIR
