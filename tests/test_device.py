"""device: auto (issue 33): cuda where torch sees one, else the CPU with the vectors of an explicit cpu to the bit; bad
devices refused naming the key; the encoder and training core importable where polars, MLflow and DVC are not."""
import subprocess
import sys

import numpy as np
import pytest
import torch
from benchmarks.common import tiny_encoder

from ticketsim.channels.sentence import DEFAULT_MODEL, EncoderError, encode_texts, load_encoder
from ticketsim.config import EncoderConfig, SentenceConfig
from ticketsim.device import DeviceError, resolve_device
from ticketsim.model.branches import TransformerBranch

TEXTS = ["The pump is leaking oil.", "Printer jams in tray 2 after the firmware update.",
         "VPN drops every ten minutes; reconnecting works until the next drop.", ""]
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")


def test_auto_is_the_one_default_of_every_transformer_pass():
    assert SentenceConfig().device == "auto" and EncoderConfig().device is None
    assert EncoderConfig().on(SentenceConfig(device="cpu")).device == "cpu"
    assert EncoderConfig(device="cuda:1").on(SentenceConfig()).device == "cuda:1"   # its own, where it names one


def test_auto_resolves_to_what_torch_sees_and_bad_devices_are_refused_by_key():
    assert resolve_device("auto", "sentence.device") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu", "sentence.device") == "cpu"
    for bad in ("gpu", "cuda:", "cuda:x", "CPU", "mps", ""):
        with pytest.raises(DeviceError, match=f"siamese.encoder.device: {bad!r} is not a device: use auto, cpu, cuda"):
            resolve_device(bad, "siamese.encoder.device")
    with pytest.raises(EncoderError, match="sentence.device: 'tpu' is not a device"):
        load_encoder(DEFAULT_MODEL, device="tpu")


@no_cuda
def test_cuda_on_a_machine_without_one_is_refused_with_the_fix():
    for device in ("cuda", "cuda:0"):
        with pytest.raises(DeviceError, match=f"sentence.device: {device}, but torch .* sees no CUDA device here: use auto or cpu"):
            resolve_device(device, "sentence.device")


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return tiny_encoder(tmp_path_factory.mktemp("encoder") / "tiny", TEXTS * 3)


@no_cuda
def test_auto_on_the_cpu_encodes_the_bytes_of_an_explicit_cpu():
    """Channel S and the index through MiniLM, and F's branch training and encoding: auto takes exactly today's path."""
    auto, cpu = (load_encoder(DEFAULT_MODEL, max_tokens=128, device=d) for d in ("auto", "cpu"))
    assert auto.device == cpu.device == "cpu"
    assert np.array_equal(encode_texts(auto, TEXTS, threads=1), encode_texts(cpu, TEXTS, threads=1))


@no_cuda
def test_the_fine_tuned_branch_on_auto_trains_and_encodes_as_on_cpu(tiny_folder):
    outputs = []
    for device in ("auto", "cpu"):
        torch.manual_seed(0)
        branch = TransformerBranch(load_encoder(str(tiny_folder), device="cpu").model, max_tokens=16, device=device)
        assert branch.device == "cpu"
        branch.train()
        loss = branch(TEXTS).pow(2).sum()
        loss.backward()
        grad = next(p.grad for p in branch.parameters() if p.grad is not None)
        with torch.no_grad():
            outputs.append((branch.eval()(TEXTS), grad))
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])


@cuda
def test_cuda_vectors_are_near_the_cpu_ones_under_float16():
    on_cuda, cpu = (load_encoder(DEFAULT_MODEL, max_tokens=128, device=d) for d in ("auto", "cpu"))
    assert on_cuda.device == "cuda"
    a, b = encode_texts(on_cuda, TEXTS), encode_texts(cpu, TEXTS)
    assert a.dtype == np.float32 and not a[-1].any() and np.abs(a - b).max() < 5e-3


@cuda
def test_the_fine_tuned_branch_trains_on_cuda_under_bfloat16(tiny_folder):
    branch = TransformerBranch(load_encoder(str(tiny_folder), device="cpu").model, max_tokens=16, device="cuda")
    vectors = branch.train()(TEXTS)
    vectors.pow(2).sum().backward()
    assert vectors.device.type == "cpu" and vectors.dtype == torch.float32
    assert all(p.grad is not None and p.grad.device.type == "cuda" for p in branch.parameters() if p.requires_grad)


CORE = ("ticketsim.device", "ticketsim.channels.sentence", "ticketsim.channels.encoder_backends", "ticketsim.model.branches",
        "ticketsim.model.siamese", "ticketsim.model.losses", "ticketsim.scoring.fused", "ticketsim.training.trainer")
ABSENT = ("polars", "mlflow", "dvc", "optuna", "faiss", "gensim", "ruamel")


def test_the_encoder_and_training_core_import_without_polars_mlflow_or_dvc():
    """A bare GPU machine has torch, transformers, sentence-transformers and numpy (benchmarks/gpu_check.py)."""
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in ABSENT)
    script = f"import importlib, sys; {blocked}\nfor name in {CORE!r}: importlib.import_module(name)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
