"""``python -m flowkit`` (also what ``torchrun -m flowkit`` runs)."""

from flowkit.cli.app import main

if __name__ == "__main__":
    main()
