"""Text front ends: text -> token ids, one module a front end, chosen from gin
(``Trainer.text = @text.chars()`` / ``@text.f5()`` / ``@text.phonemes()``).

- `flowkit.text.base`: what every vocabulary shares (id 0 padding, id 1 unknown, NFC text);
- `flowkit.text.chars`: Unicode characters (the default);
- `flowkit.text.f5`: F5-TTS's tokens (characters, Chinese as pinyin), for F5 checkpoints;
- `flowkit.text.phonemes`: IPA phonemes from espeak-ng;
- `flowkit.text.vocabs`: any of them as the trainer and synthesis meet it (encode, build,
  rebuild from a checkpoint).
"""
