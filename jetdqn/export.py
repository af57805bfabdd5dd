"""``python -m jetdqn.export --checkpoint PATH [--onnx OUT.onnx] [--safetensors OUT.safetensors]``.

A trained network leaves jetdqn in two forms. ONNX, for ONNX Runtime and TensorRT on the board: input
uint8 frames [N, history, 84, 84] with a dynamic batch, the 1/255 scaling inside the graph (so a caller
feeds the frames as they come from the preprocessing), opset 17 (TensorRT 10 parses opsets 9 to 20), and
the network's spec, game and preprocessing in the model's metadata. safetensors, the weights alone with
no pickled code, beside a small JSON of the same spec; every training run writes its final weights this
way too (model.safetensors and model.json in the run directory).
"""

from __future__ import annotations

from .needs import broken_install, need_packages, need_torch

need_packages(command=__name__ == "__main__", import_torch=False)   # torch is imported once the flags are read

import importlib
import json
import sys
from pathlib import Path
from typing import Optional

from .checkpoint import CheckpointError
from .config import (ConfigError, Parser, command, ends_on_ctrl_c, fail, given_path, one_model, positive_int,
                     run_dir_hint, written_path)
from .disk import missing_folder, why_not_written
from .policy import MODEL_FORMAT, MODEL_VERSION, not_a_run_for_best
from .signals import exit_on_stop

ONNX_OPSET = 17


def model_spec(network: dict, env_name: str, config: dict, step: Optional[int] = None,
               evaluated: Optional[dict] = None) -> dict:
    """What a model file says of itself: its network and settings, the agent step its weights were taken at
    (when known) and, for best.pt's, the score that made them the best (``evaluated``: return_mean, games,
    and the wall_s of the evaluation that decided it)."""
    spec = {"format": MODEL_FORMAT, "version": MODEL_VERSION, "env": env_name, "network": network, "config": config}
    if step is not None:
        spec["step"] = int(step)
    if evaluated is not None:
        spec["evaluated"] = evaluated
    return spec


def write_safetensors(weights: dict, spec: dict, out: Path) -> tuple[Path, Path]:
    """``out`` (.safetensors) and ``out`` with .json: the weights (contiguous CPU copies) and their spec,
    each written to a .tmp file and renamed, so a kill never leaves a torn file under the final name.
    safetensors creates its file readable by its owner alone (0600, whatever the umask), so the weights take
    the spec's mode, which the umask set as for every other file of a run: a run written as root in a
    container, or by a training service's user, had a model.pt others could play and weights they could not."""
    import os
    import stat

    out = Path(out)
    spec_path = out.with_suffix(".json")
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in weights.items()}
    tmp_tensors, tmp_spec = (p.with_name(f".{p.name}.tmp") for p in (out, spec_path))   # what resume tidies
    try:
        tmp_spec.write_text(json.dumps(spec, indent=1) + "\n")
        _save_file(tensors, tmp_tensors, {"format": MODEL_FORMAT, "env": spec["env"]})
        try:
            os.chmod(tmp_tensors, stat.S_IMODE(tmp_spec.stat().st_mode))
        except OSError:   # a disk without Unix modes (FAT, exFAT, some network mounts): the save still counts
            pass
        os.replace(tmp_tensors, out)
        os.replace(tmp_spec, spec_path)
    finally:   # a full disk, a stop: no hidden half file left beside the exports
        for tmp in (tmp_tensors, tmp_spec):
            if tmp.exists():   # a read-only disk answers unlink(missing_ok) with EROFS
                tmp.unlink()
    return out, spec_path


def _save_file(tensors: dict, path: Path, metadata: dict) -> None:
    """safetensors' save_file, with a failed write as the OSError it is: safetensors raises its own
    SafetensorError ("I/O error: No space left on device (os error 28)"; 0.4.0, the floor, says "Error while
    serializing: IoError(Os { code: 28, ...})"), which the sentences for a full or read-only disk did not
    catch (a traceback from export, and from a run's end on a disk that filled)."""
    import errno
    import os
    import re

    from safetensors import SafetensorError
    from safetensors.torch import save_file
    try:
        save_file(tensors, str(path), metadata=metadata)
    except SafetensorError as exc:
        code = re.search(r"os error (\d+)|Os \{ code: (\d+)", str(exc))
        if code is None:
            raise
        number = int(code.group(1) or code.group(2))
        raise OSError(number, os.strerror(number) if number in errno.errorcode else str(exc), str(path)) from None


class _NativeOutputHeld:
    """Holds back what C++ writes to stdout and stderr (the exporter prints its whole graph to stdout when it
    fails) and drops it unless ``release`` was called: an error we turn into one sentence should not come
    with a page of IR. The line a stop signal prints while it is held goes through."""

    def __init__(self):
        self.released = False

    def release(self) -> None:
        self.released = True

    def __enter__(self) -> "_NativeOutputHeld":
        import os
        import tempfile
        sys.stdout.flush()
        sys.stderr.flush()
        self.file = tempfile.TemporaryFile()
        self.saved = [os.dup(1), os.dup(2)]
        os.dup2(self.file.fileno(), 1)
        os.dup2(self.file.fileno(), 2)
        return self

    def __exit__(self, *exc) -> None:
        import os
        for fd, saved in zip((1, 2), self.saved):
            os.dup2(saved, fd)
            os.close(saved)
        self.file.seek(0)
        held = self.file.read().decode(errors="replace")
        self.file.close()
        if self.released:
            sys.stderr.write(held)
        elif exc[0] is SystemExit:   # a stop signal's one line (signals.exit_on_stop) is ours, not the exporter's
            sys.stderr.write("".join(l for l in held.splitlines(keepends=True) if l.startswith("stopped by ")))


class OpsetError(ValueError):
    """torch's exporter cannot write the asked opset (its message says which it can)."""


def write_onnx(weights: dict, spec: dict, out: Path, opset: int = ONNX_OPSET) -> Path:
    """The network as ONNX: uint8 (or float, for vector observations) input with a dynamic batch. Written to
    a .tmp file and renamed, like the safetensors: an export that fails leaves an earlier file whole. The
    exporter and the checker get bytes, never the path: their native code takes only UTF-8 paths, and a
    folder whose name is not (a Latin-1 name from an old drive) was a TypeError traceback."""
    import io
    import inspect
    import os
    import warnings

    import onnx
    import torch
    from .learn.network import build_network
    network = spec["network"]
    obs_shape = tuple(network["obs_shape"])
    net = build_network(obs_shape, int(network["n_actions"]), any(k.startswith("head.value") for k in weights))
    net.load_state_dict(weights)
    net.eval()
    dtype = torch.uint8 if len(obs_shape) == 3 else torch.float32
    example = torch.zeros((2, *obs_shape), dtype=dtype)
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    exported = io.BytesIO()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # the TorchScript exporter's deprecation notice
            with _NativeOutputHeld() as held:
                # the TorchScript exporter, which 2.9 and later ask for by name; torch before 2.5 has only it
                # and no ``dynamo`` argument (a TypeError: a board's NVIDIA wheel may be that old)
                which = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
                try:
                    torch.onnx.export(net, (example,), exported, input_names=["frames"], output_names=["q_values"],
                                      dynamic_axes={"frames": {0: "batch"}, "q_values": {0: "batch"}},
                                      opset_version=opset, **which)
                except (RuntimeError, ValueError) as exc:
                    if "opset" not in str(exc).lower():
                        held.release()
                        raise
                    raise OpsetError(str(exc).strip().splitlines()[0]) from None
        model = onnx.load_model_from_string(exported.getvalue())
        entry = model.metadata_props.add()
        entry.key, entry.value = MODEL_FORMAT, json.dumps(spec)
        try:   # torch writes some opsets it cannot keep to (5: a Cast whose 'to' opset 5 reads as a string)
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:
            raise OpsetError(f"what it writes at opset {opset} fails ONNX's checker: "
                             f"{str(exc).strip().splitlines()[0]}") from None
        with open(tmp, "wb") as f:
            f.write(model.SerializeToString())
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


def held_by_another_file(spec_path: Path) -> Optional[str]:
    """``spec_path`` and what it holds, where that is not a model spec an export may replace: ``--safetensors
    RUN/config.safetensors`` wrote its spec over the run's config.json (the resume then built another network
    and refused its own checkpoint), and over any other JSON of that name. None where it is free to write."""
    if not (spec_path.exists() or spec_path.is_symlink()):
        return None
    if spec_path.is_dir():
        return f"{spec_path}, which is a folder"
    try:
        doc = json.loads(spec_path.read_text())
    except (OSError, ValueError):   # unreadable, not JSON, not text: not an export's
        doc = None
    if isinstance(doc, dict) and doc.get("format") == MODEL_FORMAT:
        return None   # an earlier export's spec: replaced with its weights, as a second export does
    return f"{spec_path}, which holds something else (not a jetdqn model spec), and would be replaced"


@ends_on_ctrl_c
def main(argv: Optional[list[str]] = None) -> int:
    # play's and evaluate's word for the model, and an output flag as other tools spell it
    hints = {"--model": "--model: export takes the model, a run directory or a file, as its first word or "
                        "--checkpoint",
             **{flag: f"{flag}: give --onnx OUT.onnx, --safetensors OUT.safetensors, or both"
                for flag in ("--out", "--output")},
             **run_dir_hint("export", "--checkpoint")}
    p = Parser(prog=command("export"), description=__doc__.splitlines()[0], hints=hints)
    p.add_argument("named", nargs="?", type=given_path, default=None, metavar="MODEL",
                   help="The same as --checkpoint: python -m jetdqn.export RUN_DIR --onnx OUT.onnx.")
    p.add_argument("--checkpoint", type=given_path, default=None, help="The model: a run directory (its model.pt, else "
                                                       "model.safetensors, else checkpoints/latest.pt), a checkpoint "
                                                       "(.pt) or a safetensors export (.safetensors, .json beside it).")
    p.add_argument("--onnx", type=written_path, default=None, help="Write the network as ONNX to this file (.onnx).")
    p.add_argument("--safetensors", type=written_path, default=None, help="Write the weights to this file (.safetensors) and "
                                                       "their spec beside it (.json).")
    p.add_argument("--opset", type=positive_int, default=None, help=f"ONNX opset (default {ONNX_OPSET}).")
    p.add_argument("--best", action="store_true", help="A run directory's best weights (best.pt or best.safetensors, "
                                                        "written with --save-best), as evaluate --best.")
    args = p.parse_args(argv)
    need_torch()   # after the flags: a mistyped one is refused without waiting for torch's import
    exit_on_stop()   # a SIGTERM mid-write ends it as Ctrl-C does: the .tmp file goes, the earlier export stays
    try:
        args.checkpoint = one_model(args.named, "--checkpoint", args.checkpoint)
    except ConfigError as exc:
        fail(str(exc))
    if args.checkpoint is None:   # `export RUN_DIR`, as evaluate takes it, was "--checkpoint is required"
        fail("nothing to export from: give the model, a run directory or a file (python -m jetdqn.export RUN_DIR "
             "--onnx OUT.onnx), or --checkpoint PATH.")
    if not (args.onnx or args.safetensors):
        fail("nothing to export: give --onnx OUT.onnx and/or --safetensors OUT.safetensors.")
    if args.best and (refused := not_a_run_for_best(args.checkpoint)):   # as evaluate's: a file is no run's best
        fail(refused)
    if args.opset is not None and not args.onnx:   # was ignored: a safetensors file has no opset
        fail(f"--opset {args.opset} is the ONNX file's opset, and there is no --onnx: add --onnx OUT.onnx, or drop "
             "--opset.")
    if args.opset is None:
        args.opset = ONNX_OPSET
    for flag, path, suffix in (("--onnx", args.onnx, ".onnx"), ("--safetensors", args.safetensors, ".safetensors")):
        if path and Path(path).suffix != suffix:
            fail(f"{flag} {path}: the file name must end in {suffix}.")
        no_folder = missing_folder(path) if path else None
        if no_folder:
            fail(f"{flag} {path}: {no_folder}.")
    other = args.safetensors and held_by_another_file(Path(args.safetensors).with_suffix(".json"))
    if other:
        fail(f"--safetensors {args.safetensors} writes its spec to {other}; give the export another name.")
    if args.onnx:   # before anything is written: --safetensors beside it was written, then the export failed
        try:
            importlib.import_module("onnx")
        except Exception as exc:   # not installed, or installed for other packages (needs.broken_install)
            fail(broken_install("onnx", exc, "--onnx")
                 or "--onnx needs the onnx package: pip install onnx (or pip install -e \".[export]\").")
    from .policy import model_of, read_model
    try:
        weights, spec = read_model(model_of(Path(args.checkpoint), args.best))
    except CheckpointError as exc:
        fail(str(exc))
    spec = model_spec(spec["network"], spec["env"], spec["config"], spec.get("step"), spec.get("evaluated"))
    step = spec.get("step")   # which weights went out: a run's model.pt, its best.pt or a checkpoint are not alike
    weights_of = (f"the weights of step {step:,}" if isinstance(step, int) and not isinstance(step, bool)
                  else "weights whose file does not say their step")
    writing = args.safetensors
    try:
        if args.safetensors:
            tensors, spec_path = write_safetensors(weights, spec, Path(args.safetensors))
            print(f"wrote {tensors} and {spec_path} ({weights_of})")
        writing = args.onnx
        if args.onnx:
            shape = spec["network"]["obs_shape"]
            kind = "uint8" if len(shape) == 3 else "float32"   # frames as bytes; a vector env's numbers (CartPole)
            print(f"wrote {write_onnx(weights, spec, Path(args.onnx), args.opset)} (opset {args.opset}, "
                  f"input {kind} [N, {', '.join(map(str, shape))}], dynamic N; {weights_of})")
    except OpsetError as exc:
        fail(f"--opset {args.opset}: torch's ONNX exporter cannot write it ({exc}); the default, "
             f"{ONNX_OPSET}, is what TensorRT 10 and ONNX Runtime read.")
    except OSError as exc:   # exc.filename is the hidden .tmp file the export was written to first
        before = " The file there before is unchanged." if Path(writing).exists() else ""
        fail(f"could not write {writing} ({why_not_written(exc)}).{before}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
