"""Verifier-guided refinement, judge/PRM corruption audits and the extract-or-verify router.

* :mod:`.feedback` -- slot-level feedback text from the verifier's reasons and the registry;
* :mod:`.refine` -- ``calver refine``: revision rounds vs token-matched best-of-K';
* :mod:`.audit_judges` -- ``calver audit-judges``: deterministic corruptions scored by verifier / PRM / judge;
* :mod:`.router` -- ``calver route``: graph-agreement routing between extract-then-solve and CALVER;
* :mod:`.cli` -- the three subcommands (``add_commands``) and :func:`~.cli.sample_pool`.

Submodules import lazily; nothing here loads torch.
"""

from calver.infer.refine.feedback import feedback_for, slot_docs, slot_feedback

__all__ = ["feedback_for", "slot_docs", "slot_feedback"]
