"""Values the commands' option declarations show, without importing the modules that own them.

Every ``iogauge`` invocation (even ``--version``) builds the options of every command, so a
default or a help text that imported its owner (the analysis engine, the guarantee
controller, the lab's simulator, polars, DuckDB) would make every command pay for all of
them. Each value here is a copy of its owner's, named beside it;
``tests/unit/test_cli_startup.py`` checks that every copy still equals the owner's value.
"""

from __future__ import annotations

from pathlib import Path

#: :data:`iogauge.analysis.compare.ALPHA`: significance level of the noise test.
COMPARE_ALPHA = 0.01
#: :data:`iogauge.analysis.compare.MIN_EFFECT_PCT`: smallest relative change (%) reported.
COMPARE_MIN_EFFECT_PCT = 5.0
#: The keys of :data:`iogauge.importers.registry.FORMATS`, in sniffing priority order.
FORMAT_IDS = ("sa", "sa-sadf", "sadf", "iostat-json", "fio", "perfmon", "rmf", "awr-html",
              "awr", "statspack",
              "aix-iostat", "solaris-iostat", "unix-sar", "sar", "iostat", "diskstats")
#: :data:`iogauge.guarantee.safety.DEFAULT_STATE_PATH`.
GUARANTEE_STATE_PATH = Path("/run/iogauge/guarantee.state.json")
#: :data:`iogauge.collector.recorder.MAX_FLUSH_S`: most seconds between commits (s).
RECORD_MAX_FLUSH_S = 5.0
#: :data:`iogauge.lab.device.DEFAULT_MODEL`.
LAB_DEFAULT_MODEL = "hdd"
#: :data:`iogauge.lab.device.DEFAULT_BACKING_DIR`.
LAB_DEFAULT_BACKING_DIR = Path("/var/tmp")  # noqa: S108 (a fresh mkdtemp dir is made in it)
#: :data:`iogauge.lab.experiments.EXPERIMENTS`.
LAB_EXPERIMENTS = ("paper-sec3", "paper-eval1", "paper-eval2", "paper-eval3")
#: :data:`iogauge.lab.paper_eval.VARIANT_NAMES`.
LAB_VARIANT_NAMES = ("paper/user", "paper/kernel", "adaptive/kernel", "paper/user/util99")
