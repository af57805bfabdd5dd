"""``jetdqn train|play|bench|plot|telemetry|export|evaluate|supervise ...``: one console script for the package's commands."""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"train": "jetdqn.train", "play": "jetdqn.play", "bench": "jetdqn.bench.__main__",
                "plot": "jetdqn.plot", "telemetry": "jetdqn.telemetry.__main__", "export": "jetdqn.export", "evaluate": "jetdqn.evaluate",
                "supervise": "jetdqn.supervise"}
    usage = f"usage: jetdqn {{{','.join(commands)}}} [flags]  (each takes --help); jetdqn --version"
    from .signals import outlive_the_terminal
    outlive_the_terminal(goes_on=False)   # --help on a full disk: one sentence and status 2 (each command sets its own)
    if argv[:1] == ["help"]:   # git's and pip's word: "jetdqn has no command 'help'"
        argv = [argv[1], "--help"] if argv[1:2] and argv[1] in commands else ["--help"]
    if argv[:1] in (["-h"], ["--help"]):
        print(usage, flush=True)   # flushed here: a full disk's error at the exit's flush is "Exception ignored"
        return 0
    if argv[:1] in (["-V"], ["--version"]):   # what an issue report needs: this jetdqn, its torch, its Python
        from . import __version__
        from .needs import versions
        print(f"jetdqn {__version__} ({versions()})", flush=True)
        return 0
    if not argv or argv[0] not in commands:
        import difflib
        near = difflib.get_close_matches(argv[0].lower(), commands, n=1, cutoff=0.6) if argv else []   # TRAIN too
        meant = (f" (did you mean {near[0]}?)" if near else
                 " (did you mean --version?)" if argv[:1] == ["version"] else
                 f" (the command comes first: jetdqn train {argv[0]} ...)" if argv and argv[0].startswith("-") else "")
        print(usage if not argv else f"error: jetdqn has no command {argv[0]!r}{meant}; {usage[len('usage: '):]}",
              file=sys.stderr)
        return 2
    import importlib
    from .needs import MissingPackages, stop_quietly_while_starting
    if argv[0] != "supervise":   # it passes every signal on to its command from the start
        stop_quietly_while_starting()   # torch's import takes seconds, before the command's own handling
    try:
        module = importlib.import_module(commands[argv[0]])
    except MissingPackages as exc:
        print(f"error: {exc}", file=sys.stderr)   # jetdqn/needs.py's sentence
        return 2
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
