"""The agent's entry: `python -m console.gpu.agent`, and the zipapp's (its own __main__ runs this module)."""

from .cli import main

if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
