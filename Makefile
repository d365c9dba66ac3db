# Conveniences over the README's two commands.
VENV ?= .venv

.PHONY: demo test lint bench clean

$(VENV)/bin/pivot: pyproject.toml
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

demo: $(VENV)/bin/pivot
	$(VENV)/bin/pivot demo

test: $(VENV)/bin/pivot
	$(VENV)/bin/pytest

lint: $(VENV)/bin/pivot
	$(VENV)/bin/ruff check console tests bench
	$(VENV)/bin/mypy

bench: $(VENV)/bin/pivot
	$(VENV)/bin/python -m bench.sim_throughput

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
