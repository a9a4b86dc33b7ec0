"""A pasted log of megabytes in one field: read in bounded time and memory, cut at intake to MAX_TEXT_CHARS and counted,
tokenized in pieces NLTK's regex time limit allows, and DocNADE's activity of a long text without overflow."""
import csv
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from ticketsim.config import TextConfig
from ticketsim.data.validate import MAX_TEXT_CHARS
from ticketsim.search.reasons import ReasonTopics
from ticketsim.text.tokenize import PIECE_CHARS, Tokenizer, pieces, pretrained_punkt

LOG_LINE = "2026-03-04 05:06:07 pump P3: seal pressure at 3.5 bar. ERROR: relay K3 tripped, Mr. Smith notified\n"


def test_a_long_text_is_split_after_a_line_break_else_a_space_else_at_the_size():
    text = LOG_LINE * 40
    cut = list(pieces(text, 300))
    assert "".join(cut) == text and all(len(piece) <= 300 and piece.endswith("\n") for piece in cut)
    assert list(pieces("word " * 100, 32))[0] == "word " * 6
    assert list(pieces("x" * 70, 32)) == ["x" * 32, "x" * 32, "x" * 6]
    assert list(pieces(text, len(text))) == [text]       # a text that fits is Punkt's whole


def test_a_log_longer_than_a_piece_gives_the_tokens_of_its_lines():
    tokenize = Tokenizer(TextConfig(), pretrained_punkt())
    lines = 3 * PIECE_CHARS // len(LOG_LINE)
    assert tokenize(LOG_LINE * lines) == tokenize(LOG_LINE) * lines     # no line cut inside, no word lost at a cut


# The peak is VmHWM, the high-water mark of this process's own memory since its exec: getrusage's ru_maxrss survives
# exec and counts the forking parent's, so once the pytest process had grown past 2 GB the bound failed on its size.
FIFTY_MB = """
import json, re, sys, time
started = time.perf_counter()
from ticketsim.config import TextConfig
from ticketsim.data.csvsource import read_corpus
from ticketsim.data.validate import IntakeReport
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
report = IntakeReport()
corpus = read_corpus(sys.argv[1], {"test": 1.0}, report, read=("tickets",))
tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus), progress=False)
print(json.dumps([report.as_dict(), corpus.tickets["description"].str.len_chars().to_list(),
                  tokens.tickets["description"].list.len().to_list(),
                  int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) // 1024,
                  time.perf_counter() - started]))
"""


@pytest.mark.slow   # 15 s on 2 busy cores
def test_a_50_mb_field_is_read_cut_and_tokenized_in_bounded_time_and_memory(tmp_path):
    """Before: NLTK's regex time limit stopped tokenizing it (exit 70); a 5 MB field took 2.4 GB through `index build`."""
    log = LOG_LINE * (50_000_000 // len(LOG_LINE))
    with (tmp_path / "tickets.csv").open("w", newline="") as out:
        csv.writer(out).writerows([("ticket_id", "subject", "description", "solution"),
                                   ("T1", "pump log", log, "replaced the relay"), ("T2", "fan", "fan noise", "greased")])
    done = subprocess.run([sys.executable, "-c", FIFTY_MB, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report, chars, lengths, peak_mb, seconds = json.loads(done.stdout)
    assert report == {"tickets": 2, f"tickets description cut to its first {MAX_TEXT_CHARS:,} characters": 1}
    assert chars == [MAX_TEXT_CHARS, 9]
    per_line = len(Tokenizer(TextConfig(), pretrained_punkt())(LOG_LINE))
    assert lengths[0] >= per_line * (MAX_TEXT_CHARS // len(LOG_LINE)) and lengths[1] == 2
    # The file is held while it is read (bytes, text, the CSV reader's copy); nothing after the intake grows with it.
    assert peak_mb < 2048 and seconds < 60, (peak_mb, seconds)   # uncut, 2.4 GB per 5 MB: ~24 GB for 50 MB


def test_docnade_activity_of_a_long_text_neither_overflows_nor_moves_for_a_short_one():
    rng = np.random.default_rng(0)
    topics = ReasonTopics(("seal", "relay"), rng.uniform(-1.0, -0.5, (4, 2)).astype(np.float32), np.zeros(4, np.float32),
                          "sigmoid", (("seal",),) * 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # numpy's "overflow encountered in exp" before the clip
        long, short = topics.activity([["seal", "relay"] * 200, ["seal"]])
    assert np.all(long < 1e-38) and np.all(long >= 0)
    assert np.array_equal(short, 1 / (1 + np.exp(-topics.W[:, 0])))     # the formula as before the clip, to the bit
