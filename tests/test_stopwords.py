"""The frozen stopword list is scikit-learn's, word for word, and is_topical keeps only words that can name a topic."""
import pytest

from ticketsim.text.stopwords import STOPWORDS, is_topical
from ticketsim.text.tokenize import NUMBER_TOKEN


def test_the_frozen_list_is_scikit_learns_english_list_word_for_word():
    text = pytest.importorskip("sklearn.feature_extraction.text")
    assert STOPWORDS == text.ENGLISH_STOP_WORDS


@pytest.mark.parametrize("token, topical", [("pump", True), ("e9203", True), ("the", False), ("whereas", False),
                                            (NUMBER_TOKEN, False), (",", False), ("--", False), ("o-ring", True)])
def test_is_topical_drops_punctuation_the_number_mask_and_stopwords(token, topical):
    assert is_topical(token) is topical


def test_searching_does_not_import_scikit_learn_for_the_stopwords():
    import subprocess
    import sys

    code = "import sys, ticketsim.channels.docnade, ticketsim.search.reasons; print('sklearn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
