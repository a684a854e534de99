"""What an optimization leaves behind: ``result.json``, the output variant folder
(``variant/<name>.yaml``, ``diff.md``, ``provenance.json``) and the report; and
:func:`adopt`, which copies the output variant into the project's descriptions."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench import __version__
from bench.descriptions.variants import Variant, load_variant
from bench.errors import BenchError, pydantic_error_field
from bench.importers.common import variant_yaml
from bench.optimize.config import OptimizeConfig
from bench.optimize.report import diff_markdown, write_report
from bench.optimize.records import OptimizeResult
from bench.optimize.workspace import Workspace
from bench.project import Project
from bench.store.files import atomic_write_json, atomic_write_text




def provenance(config: OptimizeConfig, result: OptimizeResult, workspace: Workspace
               ) -> dict[str, Any]:
    """Where the output variant came from: settings, proposer and target, the prompts'
    files, the runs with their costs, the decision."""
    prompts = sorted(str(p.relative_to(workspace.root))
                     for p in (workspace.root / "work" / "proposals").glob("*.jsonl"))
    return {"bench_version": __version__, "opt_id": result.opt_id,
            "toolset": result.toolset, "start": result.start,
            "start_sha256": result.start_sha256, "final": result.final,
            "target": config.target, "proposer": config.proposer, "seed": config.seed,
            "template": config.template or "bench/optimize/prompt.j2",
            "prompts": prompts, "config": json.loads(config.model_dump_json()),
            "runs": [r.model_dump() for r in result.runs],
            "billed_usd": result.billed_usd, "requests": result.requests,
            "accepted": result.acceptance.accepted, "reasons": result.acceptance.reasons,
            "kept": [{"name": c.name, "round": c.round, "tools": c.tools,
                      "reasons": c.reasons} for c in result.candidates if c.status == "kept"]}


def write_outputs(workspace: Workspace, config: OptimizeConfig, result: OptimizeResult,
                  variants: dict[str, Variant]) -> None:
    """Write ``result.json``, the variant folder and the report (Markdown and HTML);
    ``variants``: every variant of the search by name (the start and the final among them).
    """
    start, final = variants[result.start], variants[result.final]
    workspace.write_result(json.loads(result.model_dump_json()))
    folder = workspace.root / "variant"
    verdict = "accepted on test" if result.acceptance.accepted else "NOT accepted"
    header = (f"optimized by bench optimize {result.opt_id} from '{start.name}' "
              f"({verdict}); provenance.json says how")
    atomic_write_text(folder / f"{result.output}.yaml", variant_yaml(final.tools, header))
    atomic_write_text(folder / "diff.md", f"# {start.name} -> {result.output}\n\n"
                      + diff_markdown(start, final))
    atomic_write_json(folder / "provenance.json", provenance(config, result, workspace))
    write_report(workspace, config, result, variants)


def load_result(folder: Path) -> OptimizeResult:
    """The ``result.json`` of an optimization folder.

    Raises:
        BenchError: no such file, or not a result (names the file).
    """
    path = folder / "result.json"
    try:
        return OptimizeResult.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise BenchError("no finished optimization here (result.json is missing)",
                         file=path) from None
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(f"not an optimization result: {message}", file=path,
                         field=field) from None
    except ValueError as exc:
        raise BenchError(f"not an optimization result ({type(exc).__name__})",
                         file=path) from None


@dataclass(frozen=True)
class Adopted:
    """What :func:`adopt` did.

    Attributes:
        path: the variant file written.
        rebased: one line saying what changed in the start since the run and that the edits
            were rebased onto it; ``""`` when the start is as the run saw it.
    """

    path: Path
    rebased: str = ""


def _start_then_and_now(project: Project, folder: Path, result: OptimizeResult
                        ) -> tuple[Variant, Variant, Variant]:
    """(the start as the run saw it, the final variant, the start as it is now).

    Raises:
        BenchError: the run's copies are missing or no longer match ``start_sha256``, or the
            project's start does not load.
    """
    work = Workspace(project, result.opt_id, result.toolset).work.descriptions_dir
    try:
        then = load_variant(result.toolset, result.start, work)
        final = load_variant(result.toolset, result.final, work)
    except BenchError as exc:
        raise BenchError(f"optimization '{result.opt_id}': its copy of the variants is "
                         f"unreadable ({exc.message})", file=exc.file or folder) from None
    if result.start_sha256 is not None and then.sha256 != result.start_sha256:
        raise BenchError(f"optimization '{result.opt_id}': its copy of the start '"
                         f"{result.start}' is not the one it ran (hash differs from "
                         "result.json's start_sha256)", file=then.source)
    with project.activate():
        try:
            now = load_variant(result.toolset, result.start)
        except BenchError as exc:
            raise BenchError(f"optimization '{result.opt_id}' started from variant '"
                             f"{result.start}', which no longer loads ({exc.message}): "
                             "nothing to check its edits against", file=exc.file,
                             line=exc.line, field=exc.field) from None
    return then, final, now


def adopt(project: Project, opt_id: str, *, force: bool = False,
          unaccepted: bool = False) -> Adopted:
    """Copy optimization ``opt_id``'s output variant to
    ``descriptions/<toolset>/variants/<name>.yaml``, where ``bench run``, ``bench compare``
    and the gate read it like any variant.

    When the project's start variant changed since the run (its
    :attr:`~bench.descriptions.variants.Variant.sha256`, descriptions and schemas, differs
    from ``result.json``'s ``start_sha256``), the optimization's edits are rebased onto the
    start as it is now when they apply cleanly (:mod:`bench.optimize.rebase`: tools and
    parameters added since are kept), and refused otherwise. Nothing the start gained since
    the run is ever dropped, ``force`` or not.

    Args:
        project: the project; opt_id: the optimization.
        force: replace an existing file of that name.
        unaccepted: adopt a variant the held-out test did not accept.

    Returns:
        The written path, and the line saying what was rebased (:class:`Adopted`).

    Raises:
        BenchError: no such optimization, a variant that was not accepted (without
            ``unaccepted``), a start that changed where the edits do not apply (one line
            naming what changed and what conflicts), or an existing file (without
            ``force``).
    """
    from bench.optimize.rebase import (Unsupported, describe_changes, optimization_edits,
                                       rebase)

    folder = Workspace(project, opt_id, "-").root
    result = load_result(folder)
    if not result.acceptance.accepted and not unaccepted:
        why = "; ".join(result.acceptance.reasons) or "not tested"
        raise BenchError(f"optimization '{opt_id}' was not accepted ({why}); pass "
                         "--unaccepted to adopt it anyway")
    then, final, now = _start_then_and_now(project, folder, result)
    source = folder / "variant" / f"{result.output}.yaml"
    text, rebased = None, ""
    if now.sha256 != then.sha256:
        changed = describe_changes(then.tools, now.tools) or "its tools' data changed"
        try:
            edits = optimization_edits(then.tools, final.tools)
        except Unsupported as exc:
            raise BenchError(f"variant '{result.start}' changed since optimization '{opt_id}'"
                             f" ran ({changed}), and its edits cannot be rebased ({exc}); "
                             f"run bench optimize again from the current '{result.start}'",
                             file=now.source) from None
        tools, conflicts = rebase(edits, now.tools)
        if conflicts:
            raise BenchError(f"variant '{result.start}' changed since optimization '{opt_id}'"
                             f" ran ({changed}); its edits do not apply to it ("
                             f"{'; '.join(conflicts)}): run bench optimize again from the "
                             f"current '{result.start}'", file=now.source)
        edited = ", ".join(dict.fromkeys(e.where for e in edits)) or "none"
        rebased = (f"rebased: variant '{result.start}' changed since optimization '{opt_id}' "
                   f"ran ({changed}); its edits ({edited}) applied cleanly and are written "
                   f"onto the current '{result.start}', keeping those changes. The held-out "
                   "test judged them on the old start: check the new one with bench compare "
                   f"{result.start} {result.output}")
        verdict = "accepted on test" if result.acceptance.accepted else "NOT accepted"
        text = variant_yaml(tools, f"optimized by bench optimize {opt_id} from "
                                   f"'{result.start}' ({verdict}), rebased onto "
                                   f"'{result.start}' as changed since the run "
                                   f"({changed}); provenance.json says how")
    target = project.descriptions_dir / result.toolset / "variants" / f"{result.output}.yaml"
    if target.exists() and not force:
        raise BenchError("a variant of that name exists; pass --force to replace it",
                         file=target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        tmp = target.with_suffix(".yaml.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)
    else:
        atomic_write_text(target, text)
    return Adopted(target, rebased)
