"""Regenerate prompts.csv from the bank (roles, scenarios, questions, class types) with the seeded answer orders.

    PYTHONPATH=lib python data/agentic/build_prompts.py

Deterministic: the same bank always gives byte-identical prompts.csv (see biaslab.benchmarks.agentic).
"""
from pathlib import Path

from biaslab.benchmarks import agentic

if __name__ == "__main__":
    path = agentic.write_prompts(Path(__file__).resolve().parent)
    print(f"wrote {path}")
