"""The shipped themes: in the wheel as console.themes (pyproject maps this directory there), read through
importlib.resources. Only the *.toml files here are themes."""
