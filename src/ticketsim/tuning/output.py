"""What the tune stage writes beside its metrics: the tuned variant's params file (read by the final stage) and the
study's plots."""
from __future__ import annotations

import warnings
from dataclasses import asdict
from pathlib import Path

import optuna
import yaml

from ticketsim.config import VariantConfig


def write_tuned(tuned: VariantConfig, path: str | Path, note: str) -> None:
    """The params file the final training reads: the variant, its weights rounded, and its LSTM size."""
    rounded = lambda weights: {k: round(float(v), 4) for k, v in weights.items()}  # noqa: E731
    body = {**asdict(tuned), "channels": rounded(tuned.channels), "levels": rounded(tuned.levels)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # PyYAML, not JSON: load_tuned reads YAML 1.1, where JSON's 3e-05 (no dot) is a string, not the float it was
    path.write_text(f"# {note}\n" + yaml.safe_dump(body, sort_keys=False, default_flow_style=None, width=1 << 16))


def write_plots(study: optuna.Study, folder: str | Path) -> list[str]:
    """Optimization history, parameter importances, parallel coordinates as PNGs (matplotlib: no CDN). Skips what cannot be drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as plots

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    skipped = []
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    for name, draw in (("optimization_history", plots.plot_optimization_history),
                       ("param_importances", plots.plot_param_importances),
                       ("parallel_coordinate", plots.plot_parallel_coordinate)):
        try:
            draw(study)
            plt.gcf().set_size_inches(10, 6)
            plt.tight_layout()
            plt.savefig(folder / f"{name}.png", dpi=100)
        except (ValueError, RuntimeError) as error:   # e.g. importances need two complete trials with varying params
            skipped.append(f"{name}: {error}")
        plt.close("all")
    return skipped
