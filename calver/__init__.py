"""calver: contract-following LLM policies selected by symbolic causal verification."""
__version__ = "0.1.0"
