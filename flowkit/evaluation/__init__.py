"""``flowkit eval``: synthesise a test list with a checkpoint and judge it (WER, CER, SIM,
DNSMOS, duration ratio), beside the ceilings of its recordings.

- `flowkit.evaluation.testset`: meta.lst (Seed-TTS-eval, F5-TTS) and manifest test lists;
  bad lines become rejections with their line numbers;
- `flowkit.evaluation.judges`: the recogniser, speaker and quality plugins;
- `flowkit.evaluation.run`: the loop (batches, per-utterance noise, resume);
- `flowkit.evaluation.render`: ``eval.md`` and ``eval.html`` in the report's style.
"""
