"""Verifier-guided refinement and the extract-or-verify router: label-free inference methods.

* :mod:`.feedback` -- slot-level feedback text from the verifier's reasons and the registry;
* :mod:`.refine` -- revision rounds and the token-matched best-of-K' baseline (graded and reported by
  :mod:`calver.evaluation.refine_eval`, ``calver refine``);
* :mod:`.router` -- graph agreement and the routing decision (threshold chosen and reported by
  :mod:`calver.evaluation.router_calibration`, ``calver route``).

Submodules import lazily; nothing here loads torch.
"""

from calver.infer.refine.feedback import feedback_for, slot_docs, slot_feedback

__all__ = ["feedback_for", "slot_docs", "slot_feedback"]
