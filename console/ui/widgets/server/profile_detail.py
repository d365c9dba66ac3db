"""What the Server pane says beside its list of profiles: the highlighted one's command line, or its diff with the
marked one, or why it is broken."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from console.server.profiles import ProfileSet, diff
from console.untrusted import visible


def profile_detail(profiles: ProfileSet, name: str, marked: str | None, error: Style) -> Text:
    if name in profiles.broken:
        return Text(str(profiles.broken[name]), style=error)
    profile = profiles.profiles[name]
    if marked and marked != name and marked in profiles.profiles:
        rows = diff(profiles.profiles[marked], profile)
        text = Text(f"{marked} → {name}\n", style="bold")
        for key, a, b in rows:
            shown = [value if value is not None else "—" for value in (a, b)]
            text.append(f"{visible(key)}: ", "bold").append(visible(f"{shown[0]} → {shown[1]}") + "\n")
        if not rows:
            text.append("the same server")
        return text
    left_out = f"\nleft out (false): {' '.join(map(visible, profile.left_out))}" if profile.left_out else ""
    across = (
        f"\nacross {', '.join(map(visible, profile.nodes))}: rank R on the R-th, each with {profile.engine.title}'s multi-node flags"
        if profile.nodes
        else ""
    )
    return Text.assemble(  # named first: beside the list, the detail reads as the neighbouring name's otherwise
        (f"{visible(name)}: ", "bold"),
        (f"{visible(profile.description)}\n", "italic"),
        (f"{profile.drafting_text()}\n", "bold"),
        profile.command_line(),
        (across, "bold"),
        (left_out, "dim"),
    )
