"""What an optimization leaves behind: ``result.json``, the output variant folder
(``variant/<name>.yaml``, ``diff.md``, ``provenance.json``) and the report; and
:func:`adopt`, which copies the output variant into the project's descriptions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench import __version__
from bench.descriptions.variants import Variant
from bench.errors import BenchError, pydantic_error_field
from bench.importers.common import variant_yaml
from bench.optimize.config import OptimizeConfig
from bench.optimize.report import diff_markdown, write_report
from bench.optimize.records import OptimizeResult
from bench.optimize.workspace import Workspace
from bench.project import Project
from bench.runstore import atomic_write_json, atomic_write_text




def provenance(config: OptimizeConfig, result: OptimizeResult, workspace: Workspace
               ) -> dict[str, Any]:
    """Where the output variant came from: settings, proposer and target, the prompts'
    files, the runs with their costs, the decision."""
    prompts = sorted(str(p.relative_to(workspace.root))
                     for p in (workspace.root / "work" / "proposals").glob("*.jsonl"))
    return {"bench_version": __version__, "opt_id": result.opt_id,
            "toolset": result.toolset, "start": result.start, "final": result.final,
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


def adopt(project: Project, opt_id: str, *, force: bool = False,
          unaccepted: bool = False) -> Path:
    """Copy optimization ``opt_id``'s output variant to
    ``descriptions/<toolset>/variants/<name>.yaml``, where ``bench run``, ``bench compare``
    and the gate read it like any variant.

    Args:
        project: the project; opt_id: the optimization.
        force: replace an existing file of that name.
        unaccepted: adopt a variant the held-out test did not accept.

    Returns:
        The written path.

    Raises:
        BenchError: no such optimization, a variant that was not accepted (without
            ``unaccepted``), or an existing file (without ``force``).
    """
    folder = Workspace(project, opt_id, "-").root
    result = load_result(folder)
    if not result.acceptance.accepted and not unaccepted:
        why = "; ".join(result.acceptance.reasons) or "not tested"
        raise BenchError(f"optimization '{opt_id}' was not accepted ({why}); pass "
                         "--unaccepted to adopt it anyway")
    source = folder / "variant" / f"{result.output}.yaml"
    target = project.descriptions_dir / result.toolset / "variants" / f"{result.output}.yaml"
    if target.exists() and not force:
        raise BenchError("a variant of that name exists; pass --force to replace it",
                         file=target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".yaml.tmp")
    shutil.copyfile(source, tmp)
    tmp.replace(target)
    return target
