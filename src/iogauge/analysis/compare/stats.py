"""Distribution tails without SciPy: Student's t from the regularised incomplete beta function
(continued fraction, Numerical Recipes 3rd ed. §6.4), the normal tail from math.erfc, and
the three tests built on them (Welch's t, Mann-Whitney U, the 2x2 chi-square).
"""

from __future__ import annotations

import math


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; NR3 §6.4)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for a, b > 0, 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(ln_front)
    # The continued fraction converges fast for x < (a+1)/(a+b+2); use the symmetry
    # I_x(a,b) = 1 - I_{1-x}(b,a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided tail probability P(|T| >= |t|) of Student's t with ``df`` degrees of
    freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0
    return min(1.0, betainc(df / 2.0, 0.5, df / (df + t * t)))


def normal_two_sided_p(z: float) -> float:
    """Two-sided tail probability P(|Z| >= |z|) of the standard normal."""
    return math.erfc(abs(z) / math.sqrt(2.0))


def welch_p(mean_b: float, var_b: float, n_b: int, mean_a: float, var_a: float,
            n_a: int) -> float:
    """Two-sided p of Welch's t-test (Welch-Satterthwaite degrees of freedom)."""
    sb, sa = var_b / n_b, var_a / n_a
    se2 = sb + sa
    if se2 <= 0.0:
        # Both sides constant: identical values are no change, different ones are certain.
        return 1.0 if mean_a == mean_b else 0.0
    t = (mean_a - mean_b) / math.sqrt(se2)
    df = se2 * se2 / ((sb * sb / (n_b - 1) if n_b > 1 else 0.0)
                      + (sa * sa / (n_a - 1) if n_a > 1 else 0.0))
    return t_two_sided_p(t, df)


def mann_whitney_p(rank_sum_b: float, n_b: int, n_a: int, tie_term: float) -> float:
    """Two-sided p of the Mann-Whitney U test by the normal approximation.

    ``rank_sum_b``: sum of the before side's ranks in the pooled sample (average ranks for
    ties); ``tie_term``: sum over groups of tied values of t^3 - t. Continuity correction 0.5,
    as SciPy's ``mannwhitneyu(method="asymptotic")``.
    """
    u_b = rank_sum_b - n_b * (n_b + 1) / 2.0
    mu = n_b * n_a / 2.0
    n = n_b + n_a
    var = n_b * n_a / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0.0:
        return 1.0  # every value tied: the two sides are indistinguishable
    z = max(abs(u_b - mu) - 0.5, 0.0) / math.sqrt(var)
    return normal_two_sided_p(z)


def chi2_2x2_p(above_b: int, n_b: int, above_a: int, n_a: int) -> float:
    """Two-sided p of the chi-square test (1 df, Yates' correction) on the 2x2 table
    above/not above x before/after."""
    below_b, below_a = n_b - above_b, n_a - above_a
    n = n_b + n_a
    above, below = above_b + above_a, below_b + below_a
    if above == 0 or below == 0:
        return 1.0
    diff = max(abs(above_b * below_a - below_b * above_a) - n / 2.0, 0.0)
    chi2 = n * diff * diff / (n_b * n_a * above * below)
    return math.erfc(math.sqrt(chi2 / 2.0))
