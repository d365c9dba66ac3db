"""The simulated host's launch profiles: shipped apart from the real engines' (console.profiles), so that a console on a
real host never offers them; `pivot demo` and the test hosts write them beside their own pivot.toml
(console/sim/host.py)."""
