"""Export: a LoRA adapter merged into its base, a checkpoint step or a safetensors step, written as
one Hugging Face safetensors folder (model + processor) with a manifest of file hashes."""
