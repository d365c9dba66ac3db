# Conveniences over the README's two commands.
VENV ?= .venv

.PHONY: demo test test-fast lint format bench clean

$(VENV)/bin/pivot: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

demo: $(VENV)/bin/pivot
	$(VENV)/bin/pivot demo

test: $(VENV)/bin/pivot
	$(VENV)/bin/pytest

# all but the tests marked slow (demo hosts, Slurm, tmux, real engines): for the edit-and-check loop; CI runs them all
test-fast: $(VENV)/bin/pivot
	$(VENV)/bin/pytest -m "not slow"

lint: $(VENV)/bin/pivot
	$(VENV)/bin/ruff check console tests bench
	$(VENV)/bin/ruff format --check console tests bench
	$(VENV)/bin/mypy

format: $(VENV)/bin/pivot
	$(VENV)/bin/ruff format console tests bench

# every figure of the performance table (about 8 minutes on 2 cores); BEFORE=PATH measures an older checkout beside
bench: $(VENV)/bin/pivot
	$(VENV)/bin/python -m bench.run_all $(if $(BEFORE),--before $(BEFORE))

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
