"""CAI's AdaLM step (arXiv:2211.03988, ../shared/papers/cai-vocabulary-idf-domain-adaptation.txt §3.2.1): expand
an MLM encoder's vocabulary on a domain corpus (Algorithm 1), then continue its MLM pre-training on that corpus,
on Ray Train (docs/cai.md).

    python jobs/adapt_domain.py                                   # splade-tiny on the SciFact corpus
    python jobs/adapt_domain.py --set cai.corpus=my_corpus.jsonl --set cai.text_field=body
    python jobs/adapt_domain.py --set cai.expand.enabled=false    # continual pre-training only

Writes into ``out_dir`` (default ``outputs/<name>``): ``adapt_report.json``, ``expanded/`` (the expanded model
before training), ``train/`` (the Ray Train run; re-running resumes it), ``model/`` (the adapted model: use
``--set model.name_or_path=<out>/model`` with the other jobs) and ``config.resolved.yaml``.

The same as ``lexray adapt-domain`` (lexray.commands.adapt_domain).
"""

from lexray.cli import run_job

if __name__ == "__main__":
    raise SystemExit(run_job(__file__))
