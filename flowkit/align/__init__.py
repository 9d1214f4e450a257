"""A learned aligner: hard, monotonic unit timings for recordings that come with text only.

A small network embeds text tokens (phonemes or characters, each word bounded by a pause
token) and latent frames into one space; its attention of every frame over the tokens,
trained with the forward-sum (CTC) objective and the binarisation loss of RAD-TTS
(Badlani et al. 2022, "One TTS Alignment To Rule Them All"), is decoded by monotonic
alignment search (Kim et al. 2020, Glow-TTS) into a duration per token, and the tokens'
frames are summed into the store's word units.

Modules: `tokens` (text -> tokens and their words), `model` (the network and its losses),
`search` (MAS), `settings` (the gin experiment), `training` (the run: start, resume,
checkpoints), `apply` (timings of a whole store), `scoring` (boundary error against
reference timings), `plots` (the run's report).
"""
