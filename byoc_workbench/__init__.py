"""BYOC Workbench: TVM's Bring Your Own Codegen flow, stage by stage, on Relax.

Importing the package imports nothing heavy; each module loads TVM (and MXNet,
for Part 2) when it is used.
"""

__version__ = "0.1.0"
