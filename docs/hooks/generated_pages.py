"""mkdocs hook: a build or `mkdocs serve` before `terminalworld docs build` stops with the command to
run, instead of a site whose result pages are missing (the generated pages are not committed)."""

from pathlib import Path

from mkdocs.exceptions import PluginError

from terminalworld.report.site import GENERATED, MARKER


def on_config(config):
    missing = [name for name in GENERATED if not Path(config["docs_dir"], name, MARKER).exists()]
    if missing:
        raise PluginError(
            f"the generated pages ({', '.join(f'{m}/' for m in missing)}) are missing from {config['docs_dir']}: "
            "run `uv run terminalworld docs build` first (it builds them from the committed snapshot)"
        )
    return config
