"""The packages: everything under console/, and the shipped data directories that pyproject's package-dir maps onto
console.themes and console.profiles (pyproject.toml alone takes a found list or a written one, not both)."""

from setuptools import find_namespace_packages, setup

setup(packages=[*find_namespace_packages(include=["console", "console.*"], exclude=["*.__pycache__"]),
                "console.themes", "console.profiles", "console.profiles.runbooks", "console.profiles.demo"])
