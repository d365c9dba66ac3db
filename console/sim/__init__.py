"""The simulated GPU host: SSH server, fake nvidia-smi, simulated SGLang server."""
