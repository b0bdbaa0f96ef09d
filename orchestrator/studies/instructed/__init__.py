"""The "Instructed to Bias" study (seed 004): decoy, certainty and belief-bias datasets generated
from templates and value grids (`instructed-to-bias/1`), answers chosen by option role, the
paper's bias scores (treatment minus control share of the target) per model with its t-test,
the decoy's attraction measure, belief accuracy, differences between models, per-product and
per-price-gap decoy scores, and the answers as CSV or parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.studies.base import Output, ReportPart, Study
from orchestrator.studies.instructed.deviations import DEVIATIONS

KIND = "instructed"


class Instructed(Study):
    kind = KIND
    seed = "the seed-004 paper (Instructed to Bias)"
    deviations = DEVIATIONS
    format_hint = "templated datasets ('format': 'instructed-to-bias/1')"
    exports = ("instructed-csv", "instructed-parquet")

    def recognises(self, data: Any) -> bool:
        from orchestrator.studies.instructed.reader import is_templated

        return is_templated(data)

    def read(self, data: Any, path: Path, job_id: str):
        from orchestrator.studies.instructed.reader import job_from_templates

        return job_from_templates(data, path, job_id=job_id)

    def power(self, plan, pilot, alpha):
        from orchestrator.studies.instructed.power import power

        return power(plan, pilot, alpha)

    def analyze(self, run) -> list[Output]:
        if not self.has_jobs(run):  # before the imports: they load scipy.stats
            return []
        from orchestrator.studies.instructed.accuracy import belief_accuracy
        from orchestrator.studies.instructed.analysis import all_scores
        from orchestrator.studies.instructed.compare import differences

        scores, products, pairs, cells = all_scores(run, self.kind)
        if not scores.height:
            return []
        outputs = [
            Output("instructed_scores", "scores", scores),
            Output("instructed_accuracy", "accuracy", belief_accuracy(run, self.kind)),
            Output("instructed_did", "differences", differences(scores, cells)),
            Output("instructed_products", "products", products),
            Output("instructed_price_gap", "pairs", pairs),
        ]
        return [o for o in outputs if o.frame.height]

    def effects(self, tables):
        import polars as pl

        from orchestrator.analysis.effects import effect_rows

        if "instructed_scores" not in tables:
            return None
        # Equation 1 takes 1/6 from a random chooser's decoy score (three options against two):
        # what is compared across runs and studies is the attraction measure, which does not
        decoy = pl.col("score").str.starts_with("Decoy")

        def pick(column: str) -> pl.Expr:
            return pl.when(decoy).then(pl.col(f"attraction_{column}")).otherwise(pl.col(column))

        table = tables["instructed_scores"].with_columns(
            pl.when(decoy).then(pl.lit("attraction")).otherwise(pl.lit("bias score")).alias("_m"),
            pl.when(decoy).then(pl.col("attraction")).otherwise(pl.col("bias_score")).alias("_e"),
            *(pick(c).alias(f"_{c}") for c in ("se", "df", "ci_low", "ci_high", "p")),
        )
        return effect_rows(
            table,
            self.kind,
            pl.col("_m"),
            "score",
            "_e",
            "_ci_low",
            "_ci_high",
            p="_p",
            se="_se",
            df="_df",
            # the attraction measure leaves the answers that chose the decoy out
            n=pl.col("n_treatment") + pl.col("n_control") - pl.col("n_decoy_treatment"),
        )

    def print_tables(self, tables, console) -> None:
        from orchestrator.studies.instructed.table import print_tables

        print_tables(tables, console)

    def report(self, tables, run, out_dir: Path) -> ReportPart:
        from orchestrator.studies.instructed.report import report

        if "instructed_scores" not in tables:
            return ReportPart()
        return report(tables, out_dir)

    def export(self, name: str, run_dir: Path, out_dir: Path) -> dict[Path, int]:
        from orchestrator.studies.instructed.export import export_answers

        return export_answers(name, run_dir, out_dir)
