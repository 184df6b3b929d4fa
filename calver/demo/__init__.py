"""``calver demo``: the whole pipeline end to end, on a laptop CPU by default.

``config`` (:class:`DemoConfig`), ``stages`` (data, SFT, GRPO, pools, PRM, refinement),
``report`` (tables, plots, the headline) and ``run`` (the CLI command and :func:`run_demo`).
"""

from calver.demo.config import DemoConfig, load_demo_config
from calver.demo.run import add_commands, run_demo

__all__ = ["DemoConfig", "add_commands", "load_demo_config", "run_demo"]
