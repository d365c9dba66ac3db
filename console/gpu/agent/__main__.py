"""python -m console.gpu.agent, and the zipapp's entry (console/gpu/agent_zip.py)."""

from .cli import main

if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
