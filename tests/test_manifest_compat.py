"""A pool written before the user-prompt renderer was renamed still resumes; a real change still refuses."""

from calver.infer.manifest import mismatches


def _manifest(user_prompt: str, version: str = "v1") -> dict:
    return {"model": {"content_hash": "h", "revision": None, "id": "m"}, "adapter": None,
            "prompt": {"version": version, "system_prompt_hashes": {"t": "x"}, "user_prompt": user_prompt},
            "quantization": None, "sampling": {"temperature": 0.8}, "seeds": {"base": 0},
            "corpus": {"hash": "c"}, "backend": {"name": "hf"}}


def test_legacy_prompt_name_is_the_same_prompt():
    old, new = _manifest("calver.infer.sample.render_prompt"), _manifest("calver.infer.sample.user_prompt")
    assert mismatches(old, new) == []


def test_a_different_prompt_still_mismatches():
    assert mismatches(_manifest("calver.infer.sample.user_prompt"), _manifest("other.fn")) == ["prompt"]
    assert mismatches(_manifest("calver.infer.sample.user_prompt", "v1"),
                      _manifest("calver.infer.sample.user_prompt", "v2")) == ["prompt"]
