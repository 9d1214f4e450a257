"""Corpus curation: judge every clip of a corpus before training and list what to keep.

Real corpora hold wrong transcripts, noisy, clipped, silent and mislabelled clips; the
corpora today's flow-matching TTS models train on were filtered with judges (Emilia's
pipeline: VAD, ASR, DNSMOS; He et al. 2024). ``flowkit curate SOURCE --out DIR`` reads
what ``flowkit prepare`` reads and writes, without touching the source:

- ``DIR/measures.jsonl``: every criterion's measures of every clip, one line per clip,
  appended as clips finish (a killed run continues where it stopped);
- ``DIR/decisions.jsonl`` / ``decisions.csv``: keep or drop per clip with the reasons;
- ``DIR/keep.lst``: the kept segment ids, one a line (``flowkit prepare --keep``);
- ``DIR/curation.json``: the criteria, judges, thresholds per speaker and counts;
- ``DIR/curation.html``: the distributions with the thresholds drawn, and players of
  dropped clips.

Modules, one concern each:

- `flowkit.curation.clips`: the clips of a source and their audio;
- `flowkit.curation.criteria`: the criteria (kind ``criterion``) and the robust thresholds;
- `flowkit.curation.measure`: measuring in worker processes, resumable;
- `flowkit.curation.decide`: from measures to the keep/drop list;
- `flowkit.curation.page`: the HTML report;
- `flowkit.curation.run`: `curate`, the whole step (gin configurable ``Curation``).
"""
