"""Where a transformer runs: params' `device` (auto, cpu, cuda, cuda:N) resolved against this machine's torch, and the
precision each pass takes there. Every transformer pass (channel S, F's training and encoding, the index, evaluate)
resolves its device here, so `auto` means the same everywhere.

On the CPU nothing changes: float32, no autocast, the vectors bit for bit those of an explicit `cpu`. On CUDA,
inference runs under float16 autocast (MiniLM's activations stay far inside float16's range) and training under
bfloat16, whose float32 exponent keeps the gradients of a pairwise loss from underflowing without a loss scaler.
"""
from __future__ import annotations

import re
from contextlib import nullcontext
from typing import Any

DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


class DeviceError(ValueError):
    """A device params name that this machine cannot run: names the key and the fix."""


def resolve_device(value: str, key: str) -> str:
    """`value` as torch names the device to run on: auto -> cuda where torch sees a GPU, else cpu. `key`: the params
    key it came from, for the error."""
    if not isinstance(value, str) or not DEVICE.fullmatch(value):
        raise DeviceError(f"{key}: {value!r} is not a device: use auto, cpu, cuda or cuda:N")
    if value == "cpu":
        return value
    import torch  # only here: a cpu run never asks CUDA (its first query initialises the driver)

    if value == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        raise DeviceError(f"{key}: {value}, but torch {torch.__version__} sees no CUDA device here: use auto or cpu")
    index = int(value.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        raise DeviceError(f"{key}: {value}, but torch sees {torch.cuda.device_count()} CUDA device(s): cuda:0 to "
                          f"cuda:{torch.cuda.device_count() - 1}")
    return value


def inference_precision(device: str) -> Any:
    """The context an encoding pass runs in: float16 autocast on CUDA, nothing on the CPU."""
    import torch

    return torch.autocast("cuda", dtype=torch.float16) if device.startswith("cuda") else nullcontext()


def training_precision(device: str) -> Any:
    """The context a training pass runs in: bfloat16 autocast on CUDA (no loss scaling needed), nothing on the CPU."""
    import torch

    return torch.autocast("cuda", dtype=torch.bfloat16) if device.startswith("cuda") else nullcontext()
