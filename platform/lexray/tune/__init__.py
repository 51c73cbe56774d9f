"""Hyper-parameter search with Ray Tune over any config key (docs/tuning.md).

``space`` (tune_spaces/*.yaml schema and validation) → ``dev`` (dev split carved from the training queries, its
evaluation inside a trial) → ``trainable`` (a Ray Train TorchTrainer inside a Tune function trainable) →
``search`` (Tuner, Optuna TPE / NSGA-II, ASHA, resume) → ``report`` (trials table, Pareto front, catalogue, the
one test evaluation). Sits beside ``workflows``: it ties training to evaluation, so nothing below imports it.
"""
