"""Parameter-efficient fine-tuning: adapters trained on a frozen base (`flowkit.adapters.lora`)
and their checkpoints, loaded onto and merged into the base (`flowkit.adapters.files`)."""
