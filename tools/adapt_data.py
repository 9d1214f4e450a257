"""The data of an adaptation recipe (tools/adapt_voice.sh): one speaker's clips in one
language of a metadata.csv corpus (``id|text|speaker|language``, ``wavs/<id>.flac``, e.g.
the shared asterisk-5voice corpus), split into training clips and held-out clips that are
never trained on, and the held-out test list for ``flowkit eval``.

Writes into OUT:

    train/metadata.csv, train/wavs   the training clips (wavs links to the corpus's folder)
    heldout.lst                      meta.lst lines ``utt|prompt_text|prompt_wav|text[|target_wav]``:
                                     each held-out clip as the target of another one's prompt
                                     (these lines carry the recordings' own ceilings), then
                                     the sentences below, written for this recipe, each with
                                     a held-out prompt
    split.json                       the ids of each part and the minutes of training audio
    replay.lst                       with --replay MANIFEST: REPLAY_CLIPS ids drawn (seeded) from the
                                     base's own training manifest, for ``flowkit prepare --keep``

    python tools/adapt_data.py CORPUS OUT --speaker allison --language en --heldout 20
    python tools/adapt_data.py CORPUS OUT --speaker allison --language en --replay BASE_CORPUS/manifest.jsonl \
        --replay-clips 120
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

#: Sentences no clip of the corpus says, per language (held out by construction).
SENTENCES = {
    "en": [
        "The garden behind the library opens at nine every morning.",
        "Please bring a warm coat, the evening will be cold.",
        "Our train was late, so we walked along the river instead.",
        "She painted the small boat blue before the summer began.",
        "Every answer you give will be kept in a safe place.",
        "The bakery on the corner sells bread until six.",
        "He forgot his umbrella twice in one week.",
        "Turn left after the bridge and look for the red door.",
        "The children counted the stars from the window.",
        "We will meet again when the snow has melted.",
    ],
    "es": [
        "El jardín detrás de la biblioteca abre a las nueve de la mañana.",
        "Por favor, trae un abrigo, la noche será fría.",
        "Nuestro tren llegó tarde y caminamos junto al río.",
        "Ella pintó el pequeño barco de azul antes del verano.",
        "Cada respuesta que usted dé se guardará en un lugar seguro.",
        "La panadería de la esquina vende pan hasta las seis.",
        "Él olvidó su paraguas dos veces en una semana.",
        "Gire a la izquierda después del puente y busque la puerta roja.",
        "Los niños contaron las estrellas desde la ventana.",
        "Nos veremos otra vez cuando se derrita la nieve.",
    ],
    "fr": [
        "Le jardin derrière la bibliothèque ouvre à neuf heures chaque matin.",
        "Apportez un manteau chaud, la soirée sera froide.",
        "Notre train était en retard, alors nous avons marché le long de la rivière.",
        "Elle a peint le petit bateau en bleu avant l'été.",
        "Chaque réponse que vous donnez sera gardée en lieu sûr.",
        "La boulangerie du coin vend du pain jusqu'à six heures.",
        "Il a oublié son parapluie deux fois dans la même semaine.",
        "Tournez à gauche après le pont et cherchez la porte rouge.",
        "Les enfants ont compté les étoiles depuis la fenêtre.",
        "Nous nous reverrons quand la neige aura fondu.",
    ],
    "it": [
        "Il giardino dietro la biblioteca apre alle nove ogni mattina.",
        "Porta un cappotto caldo, la sera sarà fredda.",
        "Il nostro treno era in ritardo, così abbiamo camminato lungo il fiume.",
        "Lei ha dipinto di blu la piccola barca prima dell'estate.",
        "Ogni risposta che darai sarà custodita in un luogo sicuro.",
        "Il forno all'angolo vende pane fino alle sei.",
        "Lui ha dimenticato l'ombrello due volte in una settimana.",
        "Gira a sinistra dopo il ponte e cerca la porta rossa.",
        "I bambini hanno contato le stelle dalla finestra.",
        "Ci rivedremo quando la neve si sarà sciolta.",
    ],
    "ru": [
        "Сад за библиотекой открывается в девять часов каждое утро.",
        "Пожалуйста, возьмите тёплое пальто, вечер будет холодным.",
        "Наш поезд опоздал, и мы пошли пешком вдоль реки.",
        "Она покрасила маленькую лодку в синий цвет перед летом.",
        "Каждый ваш ответ будет храниться в надёжном месте.",
        "Пекарня на углу продаёт хлеб до шести часов.",
        "Он дважды за неделю забыл свой зонт.",
        "После моста поверните налево и найдите красную дверь.",
        "Дети считали звёзды из окна.",
        "Мы встретимся снова, когда растает снег.",
    ],
}


def _rows(corpus: Path) -> list[list[str]]:
    return [line.split("|") for line in (corpus / "metadata.csv").read_text(encoding="utf-8").splitlines() if line]


def _write_replay(manifest: Path, clips: int, seed: int, out: Path, parser: argparse.ArgumentParser) -> dict:
    """Draw ``clips`` ids of the base's training manifest (seeded) into ``out``, one a line, sorted."""
    if not manifest.is_file():
        parser.error(f"--replay {manifest}: no such manifest (give the base's training manifest.jsonl, e.g. "
                     "tools/speak_cpu.sh's OUT/corpus/manifest.jsonl)")
    ids = []
    for n, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                ids.append(str(json.loads(line)["id"]))
            except (ValueError, KeyError, TypeError):
                parser.error(f"--replay {manifest}: line {n} is not a JSON object with an 'id'")
    if clips > len(ids):
        parser.error(f"--replay-clips {clips}: {manifest} holds {len(ids)} clips; give at most {len(ids)}")
    chosen = sorted(ids[i] for i in np.random.default_rng(seed).choice(len(ids), clips, replace=False))
    out.write_text("".join(f"{i}\n" for i in chosen), encoding="utf-8")
    return {"manifest": str(manifest.resolve()), "clips": len(chosen), "of": len(ids)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="a folder with metadata.csv (id|text|speaker|language) and wavs/")
    parser.add_argument("out", type=Path)
    parser.add_argument("--speaker", required=True)
    parser.add_argument("--language", required=True, help=f"ISO 639-1; sentences exist for {', '.join(SENTENCES)}")
    parser.add_argument("--heldout", type=int, default=20, help="clips never trained on (prompts and targets), >= 2")
    parser.add_argument("--min-words", type=int, default=4, help="a held-out clip says at least this many words")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replay", type=Path, help="the base's training manifest (jsonl, an 'id' a line): draw "
                        "--replay-clips of its ids into OUT/replay.lst")
    parser.add_argument("--replay-clips", type=int, default=0, help="how many of the base's clips to replay")
    args = parser.parse_args(argv)
    if args.replay is not None and args.replay_clips < 1:
        parser.error(f"--replay-clips {args.replay_clips}: give how many of {args.replay}'s clips to replay (>= 1)")
    if args.language not in SENTENCES:
        parser.error(f"--language {args.language!r}: no held-out sentences for it; one of {', '.join(SENTENCES)}")
    if args.heldout < 2:
        parser.error(f"--heldout {args.heldout} must be >= 2 (a prompt and a target)")
    if not (args.corpus / "metadata.csv").is_file():
        parser.error(f"{args.corpus}: no metadata.csv (give the corpus folder, e.g. ../shared/data/asterisk-5voice)")
    wavs = (args.corpus / "wavs").resolve()
    rows = [r for r in _rows(args.corpus) if len(r) >= 4 and r[2] == args.speaker and r[3] == args.language]
    if not rows:
        parser.error(f"{args.corpus}: no clip of speaker {args.speaker!r} in {args.language!r}")
    rows.sort(key=lambda r: r[0])
    long_enough = [r for r in rows if len(r[1].split()) >= args.min_words]
    if len(long_enough) < args.heldout or len(rows) - args.heldout < 10:
        parser.error(f"{len(rows)} clips ({len(long_enough)} of >= {args.min_words} words): too few for --heldout "
                     f"{args.heldout} and 10 training clips")
    order = np.random.default_rng(args.seed).permutation(len(long_enough))
    held = [long_enough[i] for i in sorted(order[: args.heldout])]
    held_ids = {r[0] for r in held}
    train = [r for r in rows if r[0] not in held_ids]

    train_dir = args.out / "train"
    train_dir.mkdir(parents=True, exist_ok=True)
    (train_dir / "metadata.csv").write_text("".join("|".join(r[:4]) + "\n" for r in train), encoding="utf-8")
    link = train_dir / "wavs"
    if not link.exists():
        link.symlink_to(wavs, target_is_directory=True)
    seconds = sum(sf.info(str(wavs / f"{r[0]}.flac")).duration for r in train)

    def wav(r: list[str]) -> str:
        return str(wavs / f"{r[0]}.flac")

    lines = []
    half = len(held) // 2
    prompts, targets = held[:half], held[half:]
    for i, target in enumerate(targets):  # recording against recording: the ceilings
        prompt = prompts[i % len(prompts)]
        lines.append(f"clip-{target[0]}|{prompt[1]}|{wav(prompt)}|{target[1]}|{wav(target)}")
    for k, sentence in enumerate(SENTENCES[args.language]):
        prompt = held[k % len(held)]
        lines.append(f"new-{k:02d}|{prompt[1]}|{wav(prompt)}|{sentence}")
    (args.out / "heldout.lst").write_text("\n".join(lines) + "\n", encoding="utf-8")
    split = {"speaker": args.speaker, "language": args.language, "train": [r[0] for r in train],
             "heldout": sorted(held_ids), "train_minutes": round(seconds / 60, 2), "seed": args.seed}
    if args.replay is not None:
        split["replay"] = _write_replay(args.replay, args.replay_clips, args.seed, args.out / "replay.lst", parser)
    (args.out / "split.json").write_text(json.dumps(split, indent=1) + "\n", encoding="utf-8")
    print(f"{args.speaker} {args.language}: {len(train)} training clips ({seconds / 60:.1f} min), "
          f"{len(held)} held out; {len(lines)} test lines in {args.out / 'heldout.lst'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
