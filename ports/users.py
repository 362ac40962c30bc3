"""Users named in messages about files (a lock file, a write-ahead log) that belong to another user."""

from __future__ import annotations


def login(uid: int) -> str:
    """The user's login name, or the number where it has none (which chown takes as well)."""
    try:
        import pwd  # not on Windows

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def user_name(uid: int) -> str:
    """The user as a message names it: "root (uid 0)", or "uid 1234" for a number without a name."""
    name = login(uid)
    return f"uid {uid}" if name == str(uid) else f"{name} (uid {uid})"
