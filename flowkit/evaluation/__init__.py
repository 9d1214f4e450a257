"""``flowkit eval``: synthesise a test list with a checkpoint and judge it (WER, CER, SIM,
DNSMOS, duration ratio) with the panel of `flowkit.judges.panel`, beside the ceilings of its
recordings; its records and totals are `flowkit.judges.records`'.

- `flowkit.evaluation.testset`: meta.lst (Seed-TTS-eval, F5-TTS) and manifest test lists;
  bad lines become rejections with their line numbers;
- `flowkit.evaluation.settings`: ``EvalSettings``, the command's options;
- `flowkit.evaluation.run`: ``evaluate``, the command's loop;
- `flowkit.evaluation.synthesis`: the texts a model can speak, batches, per-utterance noise,
  long inputs;
- `flowkit.evaluation.folder`: the eval folder, its files, resume and what it must share;
- `flowkit.evaluation.render`: ``eval.md`` and ``eval.html`` in the report's style.
"""
