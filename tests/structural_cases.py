"""Hand-built cases for the structural certificates (docs/theory.md, "Structural certificates").

Each case is a [1,3,2] (or [2,3,2]) network whose pre-activations are worked out by hand in
the comments; ``MECHANISM`` maps a case to the mechanism, the neurons that have it and, for
the look-alikes, ``None`` (the mechanism is *not* there).  Numbers are strings as in case files.
"""

W2 = [["3", "4", "1"], ["1", "1", "3"]]
X5 = [["1"], ["2/3"], ["2"], ["-4/3"], ["5/2"]]


def case(name, widths, W, b, X):
    return {"format": "exactident-case/1", "name": name, "widths": widths, "weights": W, "biases": b, "sample": X}


# The input of the issue.  Layer 1: z_0 = x - 100 < 0 on every sample (dead), z_1 = -2x + 3
# (active at 1, 2/3, -4/3), z_2 = -4x + 1 (active at -4/3 only).
DEAD = case("dead-neuron-inconclusive", [1, 3, 2], [[["1"], ["-2"], ["-4"]], W2],
            [["-100", "3", "1"], ["2", "2"]], X5)
# z_0 = x - 9/4: active at 5/2 only (z = 1/4), strictly negative elsewhere: not dead; the one row
# [5/2, 1] cannot pin a line in 1-D (rank 1 < 2): unpinned.  z_2 is unpinned too (active at -4/3 only).
ONE_ACTIVE = case("one-active-sample", [1, 3, 2], [[["1"], ["-2"], ["-4"]], W2],
                  [["-9/4", "3", "1"], ["2", "2"]], X5)
# z_0 = x - 5/2: exactly 0 at x = 5/2 (a tie), negative elsewhere: not dead (not strictly inactive).
KINK = case("kink-not-dead", [1, 3, 2], [[["1"], ["-2"], ["-4"]], W2], [["-5/2", "3", "1"], ["2", "2"]], X5)
# Two inputs, the second 0 on every sample; layer 1 as in DEAD but z_0 = x (+ 5 y) with a kink at 0.
UNTOUCHED = case("untouched-input", [2, 3, 2], [[["1", "5"], ["-2", "1"], ["-4", "-3"]], W2],
                 [["0", "3", "1"], ["2", "2"]], [[x[0], "0"] for x in X5])
# z_0 = -x - 2, z_1 = 3x - 1, z_2 = -2x - 4 = 2 z_0 on X = 0, 3, -3, 2, -1, -4: z_0 and z_2 are active
# exactly at -3, -4 (z_0 = 1, 2; z_2 = 2, 4), negative elsewhere, never 0: h_2 = 2 h_0 (proportional).
XT = [["0"], ["3"], ["-3"], ["2"], ["-1"], ["-4"]]
TWINS = case("proportional-neurons", [1, 3, 2], [[["-1"], ["3"], ["-2"]], [["0", "1", "1"], ["3", "3", "-2"]]],
             [["-2", "-1", "-4"], ["0", "0"]], XT)
# As TWINS with z_2 = -2x - 5: active at -3, -4 again (z_2 = 1, 3) but z_2 / z_0 = 1 at -3 and 3/2 at -4.
TWINS_OFF = case("twins-ratio-differs", [1, 3, 2],
                 [[["-1"], ["3"], ["-2"]], [["0", "1", "1"], ["3", "3", "-2"]]], [["-2", "-1", "-5"], ["0", "0"]], XT)
# z_0 = 2x + 1 (3, 1, 7, 9 on X = 1, 0, 3, 4) and z_1 = 1 are strictly active on every sample;
# z_2 = -2x + 3 changes sign (1, 3, -3, -5).
BLOCK = case("always-active-block", [1, 3, 2], [[["2"], ["0"], ["-2"]], [["0", "-3", "2"], ["-1", "1", "1"]]],
             [["1", "1", "3"], ["2", "-3"]], [["1"], ["0"], ["3"], ["4"]])

#: case name -> (mechanism, the neurons having it) or None for a look-alike.
MECHANISM = {
    "dead-neuron-inconclusive": ("dead-neuron", [[[1, 0]]]),
    "one-active-sample": ("unpinned-hyperplane", [[[1, 0]], [[1, 2]]]),
    "untouched-input": ("untouched-input", None),
    "proportional-neurons": ("proportional-neurons", [[[1, 0], [1, 2]], [[1, 2], [1, 0]]]),
    "always-active-block": ("always-active-block", [[[1, 0], [1, 1]], [[1, 1], [1, 0]]]),
}
HAND = [DEAD, ONE_ACTIVE, UNTOUCHED, TWINS, BLOCK]
