"""The docs site of the local demo, as a Marin step whose dependencies are the demo's reports: the
world-model probe and ECHO's miniature.

    python experiments/docs_site.py            # print the plan
    python experiments/docs_site.py --run      # build the demo (finished steps are reused), then the site

The site lands in `{MARIN_PREFIX}/terminalworld/docs-site/{version}/site/`; its `.artifact.json`
names the reports it was built from. Production passes `publish={"user", "slug", "title"}` to
`docs_site` to upload the site with Marin's `publish_site`.
"""

import os
import sys

import echo_local
from local_demo import Demo, build

from terminalworld.report import steps as reports

site = reports.docs_site(reports=[build().report, echo_local.build()], version=Demo().version)

if __name__ == "__main__":
    os.environ.setdefault("MARIN_PREFIX", os.path.abspath("local-prefix"))
    os.environ.setdefault("WANDB_MODE", "offline")
    from terminalworld.pipeline.entry import main

    sys.exit(main([site], __doc__.split("\n\n")[0]))
