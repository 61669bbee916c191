"""One Table-1 view from several harness runs (e.g. device calls that each covered some modes or classes).

    python -m vosti_plugin.integration.harness.merge --out TABLE.md RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds a `results.json` or `summary.json` written by the harness (the published runs under
integration/results keep only summary.json). For every model, mode and class the cell comes
from the last run (in argument order) that compared anything in that class; the table names the run of
each cell, so a reader can trace it to its command and log.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import typer

from vosti_plugin.integration.harness.compare import CLASS_ORDER, CLASS_TITLES


@dataclass(frozen=True)
class Cell:
    matches: int
    compared: int
    run: str

    def text(self, note_run: bool) -> str:
        return f"{self.matches}/{self.compared}" + (f" ({self.run})" if note_run else "")


def merge_runs(run_dirs: list[Path]) -> tuple[dict, dict]:
    """{(model, mode): {class: Cell}} and {(model, mode): label}, later runs overriding earlier ones."""
    cells: dict[tuple[str, str], dict[str, Cell]] = {}
    labels: dict[tuple[str, str], str] = {}
    for run_dir in run_dirs:
        path = next((Path(run_dir) / name for name in ("results.json", "summary.json")
                     if (Path(run_dir) / name).exists()), None)
        if path is None:
            raise typer.BadParameter(f"{run_dir} has no results.json or summary.json (not a harness output directory)")
        for row in json.loads(path.read_text())["rows"]:
            key = (row["model"], row["mode"])
            labels[key] = row["label"]
            for cls, tally in (row.get("tallies") or {}).items():
                if tally["compared"]:
                    cells.setdefault(key, {})[cls] = Cell(tally["matches"], tally["compared"], Path(run_dir).name)
    return cells, labels


def markdown(cells: dict, labels: dict, note_runs: bool = True) -> str:
    lines = ["| model | mode | " + " | ".join(CLASS_TITLES[c] for c in CLASS_ORDER) + " |",
             "|---|---|" + "---|" * len(CLASS_ORDER)]
    models = list(dict.fromkeys(model for model, _ in labels))
    for (model, mode), label in sorted(labels.items(), key=lambda item: models.index(item[0][0])):
        row = cells.get((model, mode), {})
        texts = [row[c].text(note_runs) if c in row else "—" for c in CLASS_ORDER]
        lines.append(f"| {model} | {label} | " + " | ".join(texts) + " |")
    return "\n".join(lines) + "\n"


def main(run_dirs: list[Path] = typer.Argument(..., help="harness output directories, oldest first"),
         out: Path = typer.Option(..., help="Markdown file to write")) -> None:
    cells, labels = merge_runs(run_dirs)
    text = markdown(cells, labels)
    out.write_text(text)
    typer.echo(text)


if __name__ == "__main__":
    typer.run(main)
