"""The `iogauge` command line. Each command lives in its own module; this file wires them."""

from __future__ import annotations

import typer

from iogauge import __version__
from iogauge.cli import (
    analyze_cmd,
    compare_cmd,
    diagnose_cmd,
    exporter_cmd,
    guarantee_cmd,
    import_cmd,
    iostat_cmd,
    record_cmd,
    report_cmd,
)
from iogauge.cli.lab_cmd import lab_app
from iogauge.cli.shutdown import spare_final_collections

app = typer.Typer(
    name="iogauge",
    help="Is the disk the bottleneck, which one, why, and how much headroom is left? "
         "Collects Linux block statistics live (exact to iostat -x), stores them, and "
         "diagnoses them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.command("iostat")(iostat_cmd.iostat)
app.command("record")(record_cmd.record)
app.command("export")(record_cmd.export)
app.command("diagnose")(diagnose_cmd.diagnose)
app.command("import")(import_cmd.import_)
app.command("analyze")(analyze_cmd.analyze_cmd)
app.command("compare")(compare_cmd.compare)
app.command("report")(report_cmd.report)
app.command("exporter")(exporter_cmd.exporter)
app.add_typer(lab_app, name="lab")
app.add_typer(guarantee_cmd.guarantee_app, name="guarantee")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"iogauge {__version__}")
        raise typer.Exit


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """iogauge: capability-aware disk bottleneck diagnosis and IOPS guarantees."""


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        # Ctrl-C before a command installed its own handling (e.g. during start-up).
        raise SystemExit(130) from None
    finally:
        spare_final_collections()


if __name__ == "__main__":
    main()
