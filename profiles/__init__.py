"""The shipped launch profiles and runbooks: in the wheel as console.profiles (pyproject maps this directory
there), read through importlib.resources. Only the *.toml files here are profiles."""
