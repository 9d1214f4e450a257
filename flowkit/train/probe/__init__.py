"""The intelligibility probe: does the model say the words? Measured while it trains.

Shape legend: n frames, d latent channels.

Every ``Probe.every`` steps, on rank 0, the probe synthesises a fixed set of sentences
with the EMA weights — the run's solver and vocoder, CFG as the report samples use it —,
transcribes them with an ``asr`` plugin and logs, per language the recogniser knows,
``probe_wer/<lang>`` and ``probe_cer/<lang>`` (and ``probe_wer``/``probe_cer``: over all
its sentences) in a ``kind: "probe"`` record of ``metrics.jsonl``. The same record holds
``probe_text_gain``: the flow loss on the probe sentences without their text minus with
it (fixed t and noise, EMA weights): above zero when the model uses the text.

The judges are the panel ``flowkit eval`` scores with (`flowkit.judges.panel`), named in
every record (``judges``: name, model and package version of each): the recogniser is
``Probe.asr`` (default: `flowkit.judges.choice.default_recognizer`, Whisper when
``flowkit[eval]`` is installed, pocketsphinx otherwise); ``Probe.speaker`` (default
``speaker.resemblyzer``) gives ``probe_sim``, the cosine similarity of the generated speech
to its prompt's recording (F5-TTS's SIM-o), and ``probe_sim_ref``, to the sentence's own
recording; ``Probe.quality`` (default ``quality.dnsmos``) gives ``probe_dnsmos`` (DNSMOS
P.835 OVRL) with ``probe_dnsmos_sig`` and ``probe_dnsmos_bak``, of the first noise draw's
sentences. A
default judge whose package is missing is left out with one line naming the extra.

Once per run (at its start) a ``kind: "probe_ceiling"`` record gives what a model can
reach on the same sentences: ``probe_truth_raw_wer`` (the recorded audio, when
``Probe.audio_dirs`` holds it) and ``probe_truth_vocoded_wer`` (the ground-truth latents
through the run's vocoder), per language like the probe's own, and the same two for
``sim`` and ``dnsmos`` (``probe_truth_raw_sim``: the sentence's recording against its
prompt's, ...).

What is fixed: the sentences (spread evenly over the split, per language, at most
``sentences`` each), each one's prompt (the next chosen sentence of the same speaker
that is at most 300 frames long, whole, with its text), the target length (the
sentence's own frames) and its labels (the emotion, rate and loudness buckets it was
recorded with: the model was trained on them, never on "unknown"), the noise (a generator
derived from the run's seed; draw k of ``Probe.draws`` from that seed + k), t and noise of
the text-gain loss. So two probes of the same weights give the same numbers, and the
probe never draws from the training streams: it runs inside a guard that restores the
global Python, numpy and torch generators, which is what keeps a resume bit-identical
with the probe on. Its time is logged as ``probe_s`` (a wall-clock field).

F5-TTS scores WER offline with Whisper after training (Chen et al. 2024, section 4);
scoring during training is flowkit's.

The probe in files of their own concern: `settings` (``Probe.<field>``, the judges it
names), `sentences` (which sentences, their prompts, what cannot be measured),
`recordings` (the recorded audio of the raw ceiling), `judging` (WER/CER per language,
SIM and DNSMOS), `runner` (`ProbeRunner`: the ceiling and the probe records) and
`outputs` (the ``probe/latest`` and ``probe/best`` folders the report lists).
"""

from __future__ import annotations

from flowkit.train.probe.outputs import write_probe_outputs
from flowkit.train.probe.runner import ProbeRunner, isolated_global_rng
from flowkit.train.probe.sentences import MAX_PROMPT_FRAMES, ProbeSentence, input_warnings
from flowkit.train.probe.settings import AUTO, PROBE_SPLITS, ProbeSettings

__all__ = ["AUTO", "MAX_PROMPT_FRAMES", "PROBE_SPLITS", "ProbeRunner", "ProbeSentence", "ProbeSettings",
           "input_warnings", "isolated_global_rng", "write_probe_outputs"]
