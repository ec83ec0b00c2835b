"""Cases whose certified ``rank_gamma`` needs an explicit (CRT) kernel, no structural one.

Seeded random networks, kept as case-file objects (numbers as strings).  Used by the
forgery and verifier tests; the dead-neuron case they also use is
``structural_cases.DEAD``.
"""

# R_Gamma = 5 with R_A >= 6 by a lower bound only (inconclusive by the rank rules).
CRT_LOWER = {"format": "exactident-case/1", "name": "crt-kernel-lower-bound", "widths": [2, 2, 2],
             "weights": [[["-1", "3"], ["3", "-3"]], [["-2", "1"], ["-1", "-1"]]],
             "biases": [["2", "-6"], ["-3", "-7"]],
             "sample": [["0", "2/3"], ["-4/3", "4"], ["1", "0"], ["0", "3"]]}
# R_Gamma = 7 < R_A = 8 < dim = 14.
CRT_EXACT = {"format": "exactident-case/1", "name": "crt-kernel-inconclusive", "widths": [2, 3, 2],
             "weights": [[["0", "-3"], ["-3", "-2"], ["-2", "-2"]], [["-2", "2", "-3"], ["-3", "-1", "-2"]]],
             "biases": [["-2", "3", "-8"], ["-3", "1"]],
             "sample": [["-4", "2/3"], ["-4/3", "-1/3"], ["1", "-4/3"], ["-1", "4/3"]]}
