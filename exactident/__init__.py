"""exactident: exact local identifiability of ReLU networks from a finite sample.

Implements Bona-Pellissier, Malgouyres and Bachoc, "Local Identifiability of
Deep ReLU Neural Networks: the Theory", NeurIPS 2022 (arXiv:2206.07424).

>>> from exactident import load_case, check
"""

from .case import Case, load_case, parse_case, write_case
from .check import check
from .errors import CaseFormatError, ExactIdentError, InvariantViolation, UnsupportedCaseError
from .network import Network
from .report import Report

__all__ = ["Case", "Network", "Report", "check", "load_case", "parse_case", "write_case",
           "ExactIdentError", "CaseFormatError", "UnsupportedCaseError", "InvariantViolation"]
__version__ = "0.1.0"
