"""The failures `ticketsim` tells apart by exit code, importable without the heavy modules that raise them."""


class StepError(RuntimeError):
    """A step could not run (a tracking server that does not answer, a failed `dvc` call): not bad input, not a bug."""
