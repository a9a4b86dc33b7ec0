"""Channel S on the ONNX backend (float32 and int8): vectors near torch's, exported once and cached, threads honoured,
clear errors. Skipped where the `fast` extra is not installed."""
import sys

import numpy as np
import pytest

from ticketsim.channels.encoder_backends import ONNX_FILE, exported_folder, int8_file
from ticketsim.channels.sentence import DEFAULT_MODEL, EncoderError, encode_texts, load_encoder
from ticketsim.config import SentenceConfig, build

pytest.importorskip("onnxruntime")
pytest.importorskip("optimum.onnxruntime")

TEXTS = ["The pump is leaking oil.", "Printer jams in tray 2 after the firmware update.",
         "VPN drops every ten minutes; reconnecting works until the next drop.",
         "Step 1: the centrifugal pump P-108B vibrated at the drive end, so the technician replaced bearing FLT-4619, "
         "realigned the coupling and logged alarm E5901 as cleared.", ""]
INT8_COSINE = 0.97      # dynamic int8 weights: 0.98-0.99 measured on MiniLM (`python -m benchmarks.encoding speed`); room for other CPUs


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def torch_vectors():
    return encode_texts(load_encoder(DEFAULT_MODEL, max_tokens=128), TEXTS, normalize=False)


@pytest.mark.parametrize(("quantize", "bound"), [("none", 0.999), ("int8", INT8_COSINE)])
def test_onnx_vectors_stay_close_to_torch(cache, torch_vectors, quantize, bound):
    encoder = load_encoder(DEFAULT_MODEL, max_tokens=128, backend="onnx", quantize=quantize, encoder_cache=cache)
    assert encoder.backend == ("onnx" if quantize == "none" else "onnx-int8") and encoder.dim == 384
    vectors = encode_texts(encoder, TEXTS, normalize=False)
    assert vectors.shape == torch_vectors.shape and not vectors[-1].any()       # an empty text is still zeros
    assert cosines(vectors[:-1], torch_vectors[:-1]).min() > bound
    if quantize == "none":
        assert np.abs(vectors - torch_vectors).max() < 1e-4


def test_the_export_is_made_once_and_reused(cache):
    folder = exported_folder(load_encoder(DEFAULT_MODEL).folder, "onnx", "int8", cache)
    load_encoder(DEFAULT_MODEL, backend="onnx", quantize="int8", encoder_cache=cache)
    assert (folder / ONNX_FILE).is_file() and (folder / int8_file()).is_file() and (folder / "modules.json").is_file()
    made = {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()}
    again = load_encoder(DEFAULT_MODEL, backend="onnx", quantize="int8", encoder_cache=cache)
    assert again.folder == str(folder) and {path: path.stat().st_mtime_ns for path in folder.rglob("*") if path.is_file()} == made
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith(".export-")] == []     # no scratch left behind


def test_the_session_runs_on_the_configured_threads(cache):
    encoder = load_encoder(DEFAULT_MODEL, backend="onnx", encoder_cache=cache, threads=2)
    options = encoder.model[0].auto_model.model.get_session_options()
    assert options.intra_op_num_threads == 2 and options.inter_op_num_threads == 1


def test_the_params_name_the_backend():
    cfg = build(SentenceConfig, {"backend": "onnx", "quantize": "int8"}, "sentence")
    assert (cfg.backend, cfg.quantize) == ("onnx", "int8") and SentenceConfig().backend == "torch"
    with pytest.raises(ValueError, match="backend"):
        build(SentenceConfig, {"backend": "tensorrt"}, "sentence")


def test_unsupported_combinations_are_clear_errors(cache):
    with pytest.raises(EncoderError, match="int8 needs sentence.backend: onnx"):
        load_encoder(DEFAULT_MODEL, quantize="int8", encoder_cache=cache)
    with pytest.raises(EncoderError, match="openvino.*transformers<5.6"):
        load_encoder(DEFAULT_MODEL, backend="openvino", encoder_cache=cache)


def test_a_missing_dependency_is_named(cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)      # as if a broken install lacked it: import fails
    with pytest.raises(EncoderError, match=r"onnxruntime is missing, a core dependency\): reinstall with pip install -e \."):
        load_encoder(DEFAULT_MODEL, backend="onnx", encoder_cache=cache)
