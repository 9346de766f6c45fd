"""Quantize a trained model into the compressed-tensors format (what vLLM and transformers load)."""
