from console.cli import run

raise SystemExit(run())
