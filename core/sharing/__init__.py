"""Several duckgraph servers on one knowledge file: one process owns the file, the others are its thin clients.

DuckDB lets one process at a time open a file for writing, and users run several MCP hosts at once (a chat app,
an editor, a CLI agent), each spawning its own `duckgraph serve` on the same file. So the servers of one file
settle who owns it, and the others forward their work to the owner:

- lock.py: ownership is an exclusive `flock` on `<db>.lock`; the owner listens on a Unix socket (next to it, or in
  a runtime folder for a long path) and writes that socket's path into the lock file, where clients read it. Both
  must be this user's own and private to them (ForeignFileError otherwise).
- protocol.py: newline-delimited JSON over that socket, one request at a time per connection; a client sends nothing
  to an owner that serves other tools (another duckgraph version).
- handover.py: `FileShare`, this server's role (owner or client), its calls to the owner, and the takeover when
  the owner goes away, with the rule for calls in flight at that moment; `call_owner` for one-off requests.

Nothing here knows about MCP: the server passes in the function that runs a request (`Handler`).
Standard library only, so a client never imports numpy, DuckDB or a model.
"""

from duckgraph.core.sharing.handover import (
    FileShare,
    NoOwnerError,
    OwnerLostError,
    RemoteError,
    RunLocally,
    call_owner,
    set_command,
)
from duckgraph.core.sharing.lock import (
    ForeignFileError,
    LockFileError,
    check_lock_file,
    holder,
    lock_file_problem,
    lock_path,
    socket_path,
    supported,
)
from duckgraph.core.sharing.protocol import (
    CallCancel,
    CancelSignal,
    OtherVersionError,
    RequestCancelled,
    current_cancel,
    version_mismatch,
)

__all__ = ["CallCancel", "CancelSignal", "FileShare", "ForeignFileError", "LockFileError", "NoOwnerError",
           "OtherVersionError", "OwnerLostError", "RemoteError", "RequestCancelled", "RunLocally", "call_owner",
           "check_lock_file", "current_cancel", "holder", "lock_file_problem", "lock_path", "set_command",
           "socket_path", "supported", "version_mismatch"]
