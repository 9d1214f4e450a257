"""Curation criteria (kind ``criterion``, `flowkit.protocols.CurationCriterion`).

==================================  ===========================================  =================
criterion                           drops                                        judge
==================================  ===========================================  =================
``criterion.transcript_cer``        a recording that does not say its text        ``asr.whisper``
``criterion.dnsmos``                noise, music, damage                          ``quality.dnsmos``
``criterion.speaking_rate``         a transcript that does not fit the time       (none)
``criterion.speaker_centroid``      another voice than the label's                ``speaker.resemblyzer``
``criterion.clipping``              a clipped recording                           (none)
``criterion.silence``               a clip that is mostly silence                 (none)
==================================  ===========================================  =================

Thresholds are per speaker and language, robust (`flowkit.curation.criteria.base`).
"""

from __future__ import annotations
