"""A model's life after training: MLflow runs, the registry, the quality gate and the retraining loop."""
