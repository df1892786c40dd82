"""Run inside a sandbox's network namespace, before the agent: the relay-free door for an
unprivileged baton (baton.sandbox.netns.RelayDoor). Standard library only, started as
``python -I -S netns_inside.py CHANNEL PORTS -- AGENT ARGS…``.

It makes a listening socket on 127.0.0.1 at each port of ``PORTS`` (comma-separated), hands
them to baton over ``CHANNEL`` (``fd:N``, an inherited socket, or ``path:P``, a Unix socket to
connect to) with ``SCM_RIGHTS``, closes its own copies, waits for baton's word (its proxies
serve those sockets now) and becomes the agent (``execvp``). Without baton's word it exits 111
and the agent never runs.
"""

import os
import socket
import sys

__all__ = ["main"]


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: netns_inside.py fd:N|path:P PORT[,PORT…] -- COMMAND…\n")
        return 2
    channel_spec, ports, command = argv[0], [int(p) for p in argv[1].split(",")], argv[3:]
    if channel_spec.startswith("fd:"):
        channel = socket.socket(fileno=int(channel_spec[3:]))
    else:
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = channel_spec.removeprefix("path:")
        if len(os.fsencode(path)) < 100:
            channel.connect(path)
        else:  # longer than a Unix socket's path may be: through the directory's descriptor
            directory, _, name = path.rpartition("/")
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            channel.connect(f"/proc/self/fd/{fd}/{name}")
            os.close(fd)
    listeners = []
    for port in ports:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        listeners.append(listener)
    socket.send_fds(channel, [b"listening"], [listener.fileno() for listener in listeners])
    for listener in listeners:
        listener.close()
    word = channel.recv(1)
    channel.close()
    if word != b"1":
        return 111
    os.execvp(command[0], command)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
