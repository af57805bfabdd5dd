"""Settings from a file: ``--config FILE`` (JSON, YAML or TOML), for runs that must be repeatable.

The committed results each have theirs in ``configs/``; command-line flags given beside ``--config``
override the file's values.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .config import Config, ConfigError, no_game_beside_env, other_library_names
RUN_ONLY = ("run_dir", "resume", "overwrite")   # where and how a run starts: never taken from a run's record
ONE_RUN = ("resume", "overwrite")   # how one command starts its run: a file would apply them to every run


def parse_settings(path, text: str) -> Any:
    """The document in ``text``, read as its suffix says: YAML (.yaml, .yml), TOML (.toml), else JSON."""
    suffix = path.suffix.lower()
    kind = {".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}.get(suffix, "JSON")
    try:
        if kind == "YAML":
            import yaml
            loads, errors = yaml_without_repeats(yaml), yaml.YAMLError
        elif kind == "TOML":
            try:
                import tomllib   # Python 3.11 on
            except ImportError:   # JetPack 6's Python 3.10: tomli is the same reader, where it is installed
                import tomli as tomllib
            loads, errors = tomllib.loads, tomllib.TOMLDecodeError
        else:
            loads, errors = (lambda doc: json.loads(doc, object_pairs_hook=json_without_repeats)), ValueError
    except ImportError:
        needs = "PyYAML (pip install pyyaml)" if kind == "YAML" else "Python 3.11 or later, or tomli (pip install tomli)"
        raise ConfigError(f"--config {path}: reading {kind} needs {needs}, or give JSON.") from None
    try:
        return loads(text)
    except errors as exc:
        kinds = "" if kind != "JSON" or suffix == ".json" else "; a settings file is .json, .yaml (.yml) or .toml"
        raise ConfigError(f"--config {path} is not valid {kind} ({str(exc).splitlines()[0]}){kinds}.") from None


class Repeated(ValueError):
    """A setting a file names twice. YAML and JSON readers keep the last without a word: a file with lr near
    its top and again further down (or preset twice) ran with whichever came last. TOML's refuses already."""


def json_without_repeats(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise Repeated(f"{', '.join(twice)} given twice")
    return dict(pairs)


# YAML 1.2's numbers, not PyYAML's YAML 1.1: there "1000000:0.00005" (--lr-cuts' STEP:LR written as the flag
# takes it) is a base-60 float, 60000000.00005, and "010" an octal 8; a seed or a cut read so trained a run
# other than the one written, or was refused with a number nobody typed ("--lr-cuts takes a string, got 90" of
# "1:30"). Those read as the text they are, which the settings then take as the flags do.
YAML_INT = r"^(?:[-+]?(?:0|[1-9][0-9_]*)|[-+]?0b[0-1_]+|[-+]?0x[0-9a-fA-F_]+)$"
YAML_FLOAT = (r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
              r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def yaml_without_repeats(yaml):
    """``yaml.safe_load`` that refuses a mapping naming a key twice, at the line of the second, and reads
    numbers as YAML 1.2 does (``YAML_INT``, ``YAML_FLOAT``)."""
    import re

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, str) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"{key} given twice (lines {seen[key] + 1} and {key_node.start_mark.line + 1})",
                        key_node.start_mark)
                seen[key] = key_node.start_mark.line
            return super().construct_mapping(node, deep)

    numbers = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    Loader.yaml_implicit_resolvers = {first: [(tag, rule) for tag, rule in rules if tag not in numbers]
                                      for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver(numbers[0], re.compile(YAML_INT), list("-+0123456789"))
    Loader.add_implicit_resolver(numbers[1], re.compile(YAML_FLOAT), list("-+0123456789."))
    return lambda text: yaml.load(text, Loader=Loader)


def settings_text(raw: bytes) -> str:
    """A settings file's text. An editor's byte-order mark goes: Notepad's UTF-8 one made JSON and TOML
    "not valid" at line 1, column 1 (YAML skipped it), and Windows PowerShell's ``>`` writes UTF-16, which read
    as UTF-8 was noise. Bytes that are not text become U+FFFD, so the parser names the line they spoil."""
    import codecs
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16", errors="replace")
    return raw.decode("utf-8-sig", errors="replace")


def settings_from_file(path) -> dict[str, Any]:
    """A run's settings from a JSON, YAML or TOML file (``--config``): Config field names, ``-`` or ``_``. A
    run's own config.json works too (what it found about the machine is left out, and its run directory,
    --resume and --overwrite, which name that run), so a run can be repeated exactly. A file written by hand
    may name the run directory (``--run-dir`` beside it wins): it was dropped without a word, and the run went
    to runs/<game>-seed<seed>. ``resume`` or ``overwrite`` set in such a file is refused: it would apply to
    every run started from the file, and an overwrite there would wipe a run each time."""
    from pathlib import Path
    path = Path(path)
    if path.is_dir():   # a run directory given for its settings: name the file that holds them
        run = f" (a run's settings are its {path / 'config.json'})" if (path / "config.json").is_file() else ""
        raise ConfigError(f"--config {path} is a folder; give a settings file{run}.")
    if not path.exists():   # a pipe is read as a file: --config <(jq ... base.json) said "no such file"
        raise ConfigError(f"--config {path}: no such file.")
    try:
        raw = path.read_bytes()
    except OSError as exc:   # was "may not write there", the run directory's words, for a file only read
        from .disk import why_not_read
        raise ConfigError(f"--config {path} cannot be read ({why_not_read(exc)}).") from None
    data = parse_settings(path, settings_text(raw))
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path} must hold a mapping of settings (name: value).")
    fields = {f.name for f in dataclasses.fields(Config)}
    spelt = {}
    for key in data:   # total-steps and total_steps both: one was dropped without a word
        spelt.setdefault(str(key).replace("-", "_"), []).append(str(key))
    twice = [" and ".join(keys) for keys in spelt.values() if len(keys) > 1]
    if twice:
        raise ConfigError(f"--config {path} gives {'; '.join(twice)}, one setting spelt two ways: keep one.")
    data = {str(k).replace("-", "_"): v for k, v in data.items()}
    a_runs_record = "runtime" in data   # config.json of a run: settings plus what the run found
    unknown = sorted(k for k in data if k not in fields)
    if unknown and not a_runs_record:
        raise ConfigError(f"--config {path}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
                          f"{other_library_names(unknown)}; the names are those of the flags (python -m jetdqn.train "
                          "--help).")
    if a_runs_record:
        return {k: v for k, v in no_game_beside_env(data).items() if k in fields and k not in RUN_ONLY}
    if data.get("game") and data.get("env"):   # the env would win, and the game go unread
        raise ConfigError(f"--config {path} gives both game ({data['game']}, an ALE game) and env ({data['env']}, a "
                          "gymnasium env): keep one.")
    for name in ONE_RUN:
        if data.get(name):
            raise ConfigError(f"--config {path} sets {name}, which belongs on the command line (how one run starts, "
                              f"where a file would apply it to every run): drop it from the file and pass --{name}.")
    return {k: v for k, v in data.items() if k not in ONE_RUN and not (k == "run_dir" and v is None)}
