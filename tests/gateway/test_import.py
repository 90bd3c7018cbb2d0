"""The gateway must start fast: importing it never pulls in LiteLLM."""

from __future__ import annotations

import subprocess
import sys


def test_import_gateway_leaves_litellm_out() -> None:
    code = (
        "import sys\n"
        "import gateway.app, genq_cli.main, genq_client\n"
        "import os; os.environ['GENQ_DEV'] = '1'\n"
        "gateway.app.create_app()\n"
        "print('litellm' in sys.modules, any(m.startswith('litellm.') for m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["False", "False"], done.stderr
